import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams exactly_once_v2 application for txn_workshop.harness.streams_workload: reads --input,
 * maps each value v to "v@--instance", writes --output. Its producers do not linger (linger.ms 0), so a
 * record leaves the client as soon as it is processed; commit.interval.ms and the producers'
 * transaction.timeout.ms are arguments.
 *
 * Usage: StreamsMapApp --bootstrap H:P --application-id A --input I --output O --instance NAME
 *        --state-dir DIR [--threads 2] [--commit-interval-ms 100] [--transaction-timeout-ms 10000]
 * Stdout: "state TAB NEW_STATE" at each state change; once RUNNING the first time,
 * "threads TAB name,name" (the local stream threads' names, `<application id>-<process id>-StreamThread-<n>`:
 * the thread's transactional id is `<application id>-<process id>-<n>`). Closes (committing) and exits
 * when stdin closes.
 */
public final class StreamsMapApp {

    public static void main(String[] argv) throws IOException, InterruptedException {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        String instance = args.get("instance");
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args.get("application-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(args.getOrDefault("threads", "2")));
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Long.parseLong(args.getOrDefault("commit-interval-ms", "100")));
        props.put(StreamsConfig.STATE_DIR_CONFIG, args.get("state-dir"));
        props.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), 0);
        props.put(
            StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG),
            Integer.parseInt(args.getOrDefault("transaction-timeout-ms", "10000")));

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args.get("input"), Consumed.with(Serdes.String(), Serdes.String()))
            .mapValues(v -> v + "@" + instance)
            .to(args.get("output"), Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        Object lock = new Object();
        boolean[] printedThreads = {false};
        streams.setStateListener((newState, oldState) -> {
            synchronized (lock) {
                System.out.println("state\t" + newState);
                System.out.flush();
            }
        });
        streams.start();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() != -1) {
                    // until EOF
                }
            } catch (IOException e) {
                // treated as closed
            }
        });
        stdin.setDaemon(true);
        stdin.start();
        while (stdin.isAlive()) {
            if (!printedThreads[0] && streams.state() == KafkaStreams.State.RUNNING) {
                List<String> names = new ArrayList<>();
                for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                    names.add(thread.threadName());
                }
                synchronized (lock) {
                    System.out.println("threads\t" + String.join(",", names));
                    System.out.flush();
                }
                printedThreads[0] = true;
            }
            stdin.join(50);
        }
        streams.close(Duration.ofSeconds(30));
    }
}
