import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentLinkedQueue;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Transactions from Kafka's own Java client, for txn_workshop.harness.java_workload: one thread and one
 * KafkaProducer per transactional id, each calling initTransactions once, then looping begin / send
 * --messages records / commit, with every --abort-every-th transaction aborted instead, until
 * --transactions per id are done or --duration-ms has passed (whichever comes first; at least one).
 *
 * A kafka-clients 4.x against a broker whose transaction.version is 2 runs KIP-890 part 2 (TV2):
 * EndTxn v5, the epoch bumped at every transaction's end. librdkafka does neither.
 *
 * Usage: TransactionalProducers --bootstrap H:P --topic T --ids a,b,c [--transactions N]
 *        [--duration-ms MS] [--abort-every K] [--messages M]
 * Stdout: one line per id, "id TAB commits TAB aborts". Exit status 1 (first errors on stderr)
 * if any producer failed: its id's line then counts what it finished before the failure.
 */
public final class TransactionalProducers {

    public static void main(String[] args) throws InterruptedException {
        PrintStream out = System.out;
        // The logging backends on the classpath write to System.out by default: stdout is the result's.
        System.setOut(System.err);
        Map<String, String> opts = options(args);
        String bootstrap = required(opts, "bootstrap");
        String topic = required(opts, "topic");
        List<String> ids = Arrays.asList(required(opts, "ids").split(","));
        long transactions = Long.parseLong(opts.getOrDefault("transactions", "-1"));
        long durationMs = Long.parseLong(opts.getOrDefault("duration-ms", "-1"));
        int abortEvery = Integer.parseInt(opts.getOrDefault("abort-every", "0"));
        int messages = Integer.parseInt(opts.getOrDefault("messages", "1"));
        if (transactions < 0 && durationMs < 0) {
            usage("--transactions or --duration-ms is needed");
        }
        long deadline = durationMs < 0 ? Long.MAX_VALUE : System.nanoTime() + durationMs * 1_000_000L;

        long[][] counts = new long[ids.size()][2];  // commits, aborts
        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < ids.size(); i++) {
            int index = i;
            Thread thread = new Thread(() -> {
                try {
                    run(bootstrap, topic, ids.get(index), index, transactions, deadline, abortEvery, messages,
                        counts[index]);
                } catch (Exception e) {
                    errors.add(ids.get(index) + ": " + e);
                }
            }, "producer-" + ids.get(index));
            thread.start();
            threads.add(thread);
        }
        for (Thread thread : threads) {
            thread.join();
        }
        for (int i = 0; i < ids.size(); i++) {
            out.println(ids.get(i) + "\t" + counts[i][0] + "\t" + counts[i][1]);
        }
        out.flush();
        if (!errors.isEmpty()) {
            System.err.println(errors.size() + " producers failed, first: " + errors.peek());
            System.exit(1);
        }
    }

    private static void run(String bootstrap, String topic, String id, int index, long transactions,
                            long deadline, int abortEvery, int messages, long[] counts) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
        props.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            producer.initTransactions();
            int partitions = producer.partitionsFor(topic).size();
            for (long n = 0; (transactions < 0 || n < transactions) && (n == 0 || System.nanoTime() < deadline); n++) {
                boolean abort = abortEvery > 0 && (n + 1) % abortEvery == 0;
                producer.beginTransaction();
                for (int m = 0; m < messages; m++) {
                    // Spread ids and their messages over the partitions: values name 1..messages of them.
                    int partition = (index + m) % partitions;
                    producer.send(new ProducerRecord<>(topic, partition, null, (id + "-" + n).getBytes()));
                }
                if (abort) {
                    // Sent first, so the partitions join the transaction and the abort reaches the coordinator.
                    producer.flush();
                    producer.abortTransaction();
                    counts[1]++;
                } else {
                    producer.commitTransaction();
                    counts[0]++;
                }
            }
        }
    }

    private static Map<String, String> options(String[] args) {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                usage("bad argument: " + args[i]);
            }
            opts.put(args[i].substring(2), args[i + 1]);
        }
        return opts;
    }

    private static String required(Map<String, String> opts, String name) {
        String value = opts.get(name);
        if (value == null || value.isEmpty()) {
            usage("--" + name + " is needed");
        }
        return value;
    }

    private static void usage(String problem) {
        System.err.println("TransactionalProducers: " + problem + " (usage: --bootstrap H:P --topic T --ids a,b"
            + " [--transactions N] [--duration-ms MS] [--abort-every K] [--messages M])");
        System.exit(2);
    }
}
