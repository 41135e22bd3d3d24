import java.io.IOException;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Consume-transform-produce with Kafka's own Java client, for txn_workshop.harness.app_workloads: a
 * consumer in group --group (read_committed, no auto commit) reads --input; per transaction, the
 * producer of --transactional-id writes each record's value uppercased to --output and sends the
 * consumer's offsets to the transaction (sendOffsetsToTransaction: `__consumer_offsets-N` joins it),
 * then commits. --transactions such transactions (each of the records one poll returned, at least
 * one). With --hold-open true, one more is begun the same way (records sent and flushed, offsets sent)
 * and held open until stdin closes, then aborted.
 *
 * Usage: ConsumeTransformProduce --bootstrap H:P --group G --transactional-id T --input I --output O
 *        [--transactions N] [--hold-open true]
 * Stdout: "commit TAB records" per committed transaction; "open TAB records" once the held one is
 * open at the coordinator with its offsets; "abort TAB records" when it is aborted.
 */
public final class ConsumeTransformProduce {

    public static void main(String[] argv) throws IOException {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        int transactions = Integer.parseInt(args.getOrDefault("transactions", "1"));
        boolean holdOpen = Boolean.parseBoolean(args.getOrDefault("hold-open", "false"));
        String output = args.get("output");

        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        c.put(ConsumerConfig.GROUP_ID_CONFIG, args.get("group"));
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 5);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args.get("transactional-id"));
        p.put(ProducerConfig.LINGER_MS_CONFIG, 0);

        try (KafkaConsumer<String, String> consumer =
                 new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer());
             KafkaProducer<String, String> producer =
                 new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            producer.initTransactions();
            consumer.subscribe(Collections.singletonList(args.get("input")));
            for (int n = 0; n < transactions + (holdOpen ? 1 : 0); n++) {
                ConsumerRecords<String, String> records = ConsumerRecords.empty();
                while (records.isEmpty()) {
                    records = consumer.poll(Duration.ofMillis(200));
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>(output, r.key(), r.value().toUpperCase()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.flush();
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                if (n < transactions) {
                    producer.commitTransaction();
                    System.out.println("commit\t" + records.count());
                    System.out.flush();
                } else {
                    System.out.println("open\t" + records.count());
                    System.out.flush();
                    while (System.in.read() != -1) {
                        // held open until stdin closes
                    }
                    producer.abortTransaction();
                    System.out.println("abort\t" + records.count());
                    System.out.flush();
                }
            }
        }
    }
}
