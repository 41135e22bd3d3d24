import java.io.PrintStream;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A transactional producer's transaction timed out at the top of the producer epoch, then its next
 * transaction, for txn_workshop.harness.epoch_top (KAFKA-20090; the id's epoch is driven up to
 * Short.MAX_VALUE - 2 beforehand, by InitProducerId):
 *
 * 1. initTransactions: the coordinator bumps the id's epoch to Short.MAX_VALUE - 1 (32766);
 * 2. a transaction with one record, left open until the coordinator aborts it on its timeout: it
 *    fences the epoch to 32767 (a fixed coordinator also rotates the producer id, the epoch being
 *    exhausted);
 * 3. abortTransaction, which the coordinator takes as a retry of its own abort and answers with the
 *    producer id and epoch it moved to (the same id at 32767 before the fix, a new one at 0 after);
 * 4. a transaction with one record at that epoch, left open: the process halts, as an application
 *    that died would, without closing the producer.
 *
 * Usage: EpochTop --bootstrap H:P --topic T --id ID --timeout-ms MS
 * Stdout: "STEP TAB producerId TAB epoch TAB state" after each step, as the coordinator describes the
 * id (kafka-clients' Admin.describeTransactions): init, timed-out, aborted, open.
 */
public final class EpochTop {

    private static PrintStream out;

    public static void main(String[] args) throws Exception {
        out = System.out;
        // The logging backends on the classpath write to System.out by default: stdout is the steps'.
        System.setOut(System.err);
        Map<String, String> opts = new java.util.HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            opts.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        String bootstrap = opts.get("bootstrap");
        String topic = opts.get("topic");
        String id = opts.get("id");
        int timeoutMs = Integer.parseInt(opts.get("timeout-ms"));

        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, Integer.toString(timeoutMs));
        props.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(topic, 0, null, id.getBytes());

        try (Admin admin = Admin.create(adminProps)) {
            KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
            producer.initTransactions();
            step(admin, id, "init");

            producer.beginTransaction();
            producer.send(record).get();
            while (describe(admin, id).state() != TransactionState.COMPLETE_ABORT) {
                Thread.sleep(100);
            }
            step(admin, id, "timed-out");

            producer.abortTransaction();
            step(admin, id, "aborted");

            producer.beginTransaction();
            producer.send(record).get();
            step(admin, id, "open");
        }
        out.flush();
        // Without closing the producer, which could end the transaction: what a dead application leaves.
        Runtime.getRuntime().halt(0);
    }

    private static TransactionDescription describe(Admin admin, String id)
            throws InterruptedException, ExecutionException {
        return admin.describeTransactions(List.of(id)).description(id).get();
    }

    private static void step(Admin admin, String id, String name) throws InterruptedException, ExecutionException {
        TransactionDescription description = describe(admin, id);
        out.println(name + "\t" + description.producerId() + "\t" + description.producerEpoch() + "\t"
            + description.state());
        out.flush();
    }
}
