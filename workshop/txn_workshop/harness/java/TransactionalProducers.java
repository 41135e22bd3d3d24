import java.io.IOException;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InvalidPidMappingException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Transactions from Kafka's own Java client, for txn_workshop.harness.java_workload: one thread and one
 * KafkaProducer per transactional id, each calling initTransactions, then looping begin / send
 * --messages records / commit, with every --abort-every-th transaction aborted instead, until
 * --transactions per id are done, --duration-ms has passed or (--until-stdin-closes true) stdin is
 * closed, whichever comes first; at least one each. --pause-ms between transactions.
 *
 * A kafka-clients 4.x against a broker whose transaction.version is 2 runs KIP-890 part 2 (TV2):
 * EndTxn v5, the epoch bumped at every transaction's end. librdkafka does neither.
 *
 * With --ride-out true, each producer rides out broker restarts and coordinator moves as an
 * application would (the KafkaProducer javadoc's pattern, and txn_workshop.harness.workload's
 * transactions_running for librdkafka): a timed-out call (retriable) is called again, as the client
 * requires; a fatal error (fenced, and the other errors after which the producer cannot go on)
 * closes the producer and a new one inits the id (fencing and aborting what the old one left open);
 * any other error aborts the transaction (a new producer if that fails too). Every error is counted,
 * none ends a producer. When the run ends, each id is settled: a last producer's initTransactions
 * returns only once no transaction of the id is open or has markers pending. Without it, the first
 * error ends that id's producer and the run exits 1.
 *
 * Usage: TransactionalProducers --bootstrap H:P --topic T --ids a,b,c [--transactions N]
 *        [--duration-ms MS] [--until-stdin-closes true] [--abort-every K] [--messages M]
 *        [--pause-ms MS] [--ride-out true]
 * Stdout: one line per event, as it happens, "KIND TAB id" or "error TAB id TAB name": commit and
 * abort (a transaction ended so: aborts include those aborted after an error), producer (a
 * KafkaProducer created for the id, not counting the last one that settles it; initTransactions
 * then ran), error (name: the Kafka exception's
 * class, the first ApiException in the cause chain). Exit status 1 (first errors on stderr) if any
 * producer failed for good.
 */
public final class TransactionalProducers {

    // A timed-out call is called again this many times before the producer is given up (ride-out).
    private static final int CALLS_PER_TIMEOUT = 3;
    private static final Duration BACKOFF = Duration.ofMillis(200);

    private static final AtomicBoolean STOP = new AtomicBoolean();
    private static PrintStream out;

    public static void main(String[] args) throws InterruptedException {
        out = System.out;
        // The logging backends on the classpath write to System.out by default: stdout is the events'.
        System.setOut(System.err);
        Map<String, String> opts = options(args);
        String bootstrap = required(opts, "bootstrap");
        String topic = required(opts, "topic");
        List<String> ids = Arrays.asList(required(opts, "ids").split(","));
        long transactions = Long.parseLong(opts.getOrDefault("transactions", "-1"));
        long durationMs = Long.parseLong(opts.getOrDefault("duration-ms", "-1"));
        boolean untilStdinCloses = Boolean.parseBoolean(opts.getOrDefault("until-stdin-closes", "false"));
        int abortEvery = Integer.parseInt(opts.getOrDefault("abort-every", "0"));
        int messages = Integer.parseInt(opts.getOrDefault("messages", "1"));
        long pauseMs = Long.parseLong(opts.getOrDefault("pause-ms", "0"));
        boolean rideOut = Boolean.parseBoolean(opts.getOrDefault("ride-out", "false"));
        if (transactions < 0 && durationMs < 0 && !untilStdinCloses) {
            usage("--transactions, --duration-ms or --until-stdin-closes true is needed");
        }
        long deadline = durationMs < 0 ? Long.MAX_VALUE : System.nanoTime() + durationMs * 1_000_000L;
        if (untilStdinCloses) {
            Thread watcher = new Thread(() -> {
                try {
                    while (System.in.read() != -1) {
                        // nothing to read: the parent only ever closes it
                    }
                } catch (IOException e) {
                    // a closed stdin, as EOF
                }
                STOP.set(true);
            }, "stdin-watcher");
            watcher.setDaemon(true);
            watcher.start();
        }

        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < ids.size(); i++) {
            Client client = new Client(bootstrap, topic, ids.get(i), i, rideOut);
            Thread thread = new Thread(() -> {
                try {
                    client.run(transactions, deadline, abortEvery, messages, pauseMs);
                } catch (Exception e) {
                    errors.add(client.id + ": " + e);
                }
            }, "producer-" + ids.get(i));
            thread.start();
            threads.add(thread);
        }
        for (Thread thread : threads) {
            thread.join();
        }
        out.flush();
        if (!errors.isEmpty()) {
            System.err.println(errors.size() + " producers failed, first: " + errors.peek());
            System.exit(1);
        }
    }

    private static void event(String kind, String id) {
        out.println(kind + "\t" + id);
    }

    /** One transactional id: its producer (re-created as errors require, with --ride-out) and its loop. */
    private static final class Client {
        final String id;
        final int index;
        final boolean rideOut;
        final Properties props = new Properties();
        final String topic;
        KafkaProducer<byte[], byte[]> producer;
        boolean inTransaction;
        int partitions;

        Client(String bootstrap, String topic, String id, int index, boolean rideOut) {
            this.id = id;
            this.index = index;
            this.topic = topic;
            this.rideOut = rideOut;
            props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
            props.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        }

        void run(long transactions, long deadline, int abortEvery, int messages, long pauseMs)
                throws InterruptedException {
            try {
                for (long n = 0; (transactions < 0 || n < transactions)
                        && (n == 0 || (System.nanoTime() < deadline && !STOP.get())); n++) {
                    boolean abort = abortEvery > 0 && (n + 1) % abortEvery == 0;
                    if (!rideOut) {
                        transaction(n, abort, messages);
                    } else {
                        try {
                            transaction(n, abort, messages);
                        } catch (KafkaException | IllegalStateException e) {
                            recover(e);
                            Thread.sleep(BACKOFF.toMillis());
                        }
                    }
                    if (pauseMs > 0) {
                        Thread.sleep(pauseMs);
                    }
                }
                if (rideOut) {
                    settle();
                }
            } finally {
                if (producer != null) {
                    producer.close();
                }
            }
        }

        private void transaction(long n, boolean abort, int messages) {
            if (producer == null) {
                open(true);
            }
            producer.beginTransaction();
            inTransaction = true;
            for (int m = 0; m < messages; m++) {
                // Spread ids and their messages over the partitions: values name 1..messages of them.
                int partition = (index + m) % partitions;
                producer.send(new ProducerRecord<>(topic, partition, null, (id + "-" + n).getBytes()));
            }
            if (abort) {
                // Sent first, so the partitions join the transaction and the abort reaches the coordinator.
                producer.flush();
                call(producer::abortTransaction);
                inTransaction = false;
                event("abort", id);
            } else {
                call(producer::commitTransaction);
                inTransaction = false;
                event("commit", id);
            }
        }

        /** A new producer for the id, initialized; {@code counted}: reported as a "producer" event. */
        private void open(boolean counted) {
            producer = new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
            inTransaction = false;
            if (counted) {
                event("producer", id);
            }
            call(producer::initTransactions);
            if (partitions == 0) {
                partitions = producer.partitionsFor(topic).size();
            }
        }

        /** A transactional call; with --ride-out, called again after a timeout (the client requires
         * the same call again before any other: its result is pending). */
        private void call(Runnable method) {
            for (int calls = 1; ; calls++) {
                try {
                    method.run();
                    return;
                } catch (TimeoutException e) {
                    if (!rideOut || calls >= CALLS_PER_TIMEOUT) {
                        throw e;
                    }
                    error(e);
                }
            }
        }

        private void recover(RuntimeException e) {
            error(e);
            if (producer == null) {
                return;
            }
            if (!inTransaction || fatal(e)) {
                drop();
                return;
            }
            try {
                call(producer::abortTransaction);
                inTransaction = false;
                event("abort", id);
            } catch (KafkaException | IllegalStateException abortError) {
                error(abortError);
                drop();
            }
        }

        /** The id settled: a new producer's initTransactions returns once nothing of the id is open or
         * pending (the coordinator answers CONCURRENT_TRANSACTIONS until its markers are written). */
        private void settle() throws InterruptedException {
            drop();
            for (int attempt = 1; ; attempt++) {
                try {
                    open(false);
                    return;
                } catch (KafkaException | IllegalStateException e) {
                    error(e);
                    drop();
                    if (attempt >= CALLS_PER_TIMEOUT) {
                        throw e;
                    }
                    Thread.sleep(BACKOFF.toMillis());
                }
            }
        }

        private void drop() {
            if (producer != null) {
                try {
                    producer.close(Duration.ZERO);
                } catch (RuntimeException e) {
                    error(e);
                }
            }
            producer = null;
            inTransaction = false;
        }

        private void error(Throwable e) {
            out.println("error\t" + id + "\t" + name(e));
            System.err.println(java.time.Instant.now() + " " + id + ": " + e);
        }
    }

    /** The errors after which a producer cannot go on (KafkaProducer's javadoc; in 4.x clients, the
     * ApplicationRecoverableException and InvalidConfigurationException kinds): it is closed, a new
     * one inits the id. Named by class, so that the source compiles against 3.x clients too. */
    private static boolean fatal(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof ProducerFencedException || t instanceof OutOfOrderSequenceException
                    || t instanceof AuthorizationException || t instanceof UnsupportedVersionException
                    || t instanceof InvalidPidMappingException) {
                return true;
            }
            for (Class<?> c = t.getClass(); c != null; c = c.getSuperclass()) {
                String name = c.getSimpleName();
                if (name.equals("ApplicationRecoverableException") || name.equals("InvalidConfigurationException")) {
                    return true;
                }
            }
        }
        return false;
    }

    /** An error's name: the class of the first ApiException in its cause chain, else its own class. */
    static String name(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof ApiException) {
                return t.getClass().getSimpleName();
            }
        }
        return e.getClass().getSimpleName();
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
            + " [--transactions N] [--duration-ms MS] [--until-stdin-closes true] [--abort-every K]"
            + " [--messages M] [--pause-ms MS] [--ride-out true])");
        System.exit(2);
    }
}
