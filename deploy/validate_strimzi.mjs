// Validates Strimzi resources (a JSON array on stdin) with the validators of npm's
// @kubernetes-models/strimzi-kafka-operator (compiled from Strimzi's CRDs); prints a JSON array
// with one message per resource, "" when valid. argv[2]: the package's directory (in the cache).
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const packageDir = process.argv[2];
const documents = JSON.parse(readFileSync(0, "utf8"));
const messages = [];
for (const document of documents) {
  const [group, version] = document.apiVersion.split("/");
  const module = await import(pathToFileURL(join(packageDir, group, version, `${document.kind}.js`)).href)
    .catch(() => null);
  if (module === null) {
    messages.push(`no validator for ${document.apiVersion} ${document.kind}`);
    continue;
  }
  try {
    new module[document.kind](document).validate();
    messages.push("");
  } catch (error) {
    messages.push(error.message);
  }
}
process.stdout.write(JSON.stringify(messages));
