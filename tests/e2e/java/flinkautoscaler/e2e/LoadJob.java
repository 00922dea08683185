package flinkautoscaler.e2e;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.Reader;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.metrics.Counter;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

/**
 * The streaming job of the end-to-end tests: a load whose rate and cost the test sets while it runs.
 *
 * <pre>
 * Source: BacklogSource (N partitions, pendingRecords)  -REBALANCE->  Work (cost per record)
 *   -HASH->  Aggregate (keyed ValueState)  ->  Sink (discarding)
 * </pre>
 *
 * <p>Records "arrive" on a timeline the test harness owns: the control file (Java properties, written
 * atomically by rename, re-read at most every {@value #CONTROL_REFRESH_MS} ms) holds {@code t0_ms},
 * {@code base}, {@code rate} and {@code cost_us}. The records that arrived by time t are
 * {@code base + rate * (t - t0_ms) / 1000}, spread evenly over the partitions. A partition's only state
 * is how many records it has emitted, checkpointed with the source, so the backlog (arrived minus
 * emitted) is exact at any time, survives every rescale and restart, and keeps growing while the job is
 * down, as a Kafka topic's would. Without a control file nothing arrives. Like a real connector's
 * reader, the source reports {@code pendingRecords} and counts {@code numRecordsIn}: the autoscaler's
 * target data rate of a source is the rate of the one plus the growth of the other.
 *
 * <p>Work costs {@code cost_us} microseconds per record, spent parked rather than computing, so one
 * subtask handles 1e6 / cost_us records per second whatever else the (small) machine is doing, and
 * adding subtasks adds capacity linearly.
 */
public final class LoadJob {

  static final long CONTROL_REFRESH_MS = 200;

  private LoadJob() {}

  // ------------------------------------------------------------------------------------------ control
  /** One reading of the control file; shared by every subtask of this job in the TaskManager. */
  static final class Control {
    private static final Map<String, Control> LAST = new ConcurrentHashMap<>();

    final long readAtMs;
    final long t0Ms;
    final double base;
    final double rate;
    final double costUs; // NaN: not set, use the job's default

    private Control(long readAtMs, long t0Ms, double base, double rate, double costUs) {
      this.readAtMs = readAtMs;
      this.t0Ms = t0Ms;
      this.base = base;
      this.rate = rate;
      this.costUs = costUs;
    }

    static Control of(String path) {
      long now = System.currentTimeMillis();
      Control last = LAST.get(path);
      if (last != null && now - last.readAtMs < CONTROL_REFRESH_MS) {
        return last;
      }
      Control next = read(path, now, last);
      LAST.put(path, next);
      return next;
    }

    private static Control read(String path, long now, Control previous) {
      Properties p = new Properties();
      try (Reader r = Files.newBufferedReader(Paths.get(path), StandardCharsets.UTF_8)) {
        p.load(r);
        return new Control(
            now,
            Long.parseLong(p.getProperty("t0_ms", "0").trim()),
            Double.parseDouble(p.getProperty("base", "0").trim()),
            Double.parseDouble(p.getProperty("rate", "0").trim()),
            Double.parseDouble(p.getProperty("cost_us", "NaN").trim()));
      } catch (NoSuchFileException e) {
        return new Control(now, now, 0, 0, Double.NaN); // nothing arrives yet
      } catch (IOException | RuntimeException e) {
        // The harness renames complete files into place, so this is rare; keep the last reading.
        return previous != null
            ? new Control(now, previous.t0Ms, previous.base, previous.rate, previous.costUs)
            : new Control(now, now, 0, 0, Double.NaN);
      }
    }

    /** Records arrived on all partitions together by {@code nowMs}. */
    double arrived(long nowMs) {
      return base + rate * Math.max(0, nowMs - t0Ms) / 1000.0;
    }
  }

  // ------------------------------------------------------------------------------------------ source
  /** A partition and how many of its records were emitted (its offset). */
  static final class Partition implements SourceSplit, Serializable {
    final int id;
    volatile long emitted;

    Partition(int id, long emitted) {
      this.id = id;
      this.emitted = emitted;
    }

    @Override
    public String splitId() {
      return "partition-" + id;
    }

    Partition copy() {
      return new Partition(id, emitted);
    }
  }

  static final class PartitionSerializer implements SimpleVersionedSerializer<Partition> {
    @Override
    public int getVersion() {
      return 1;
    }

    @Override
    public byte[] serialize(Partition p) throws IOException {
      ByteArrayOutputStream bytes = new ByteArrayOutputStream(12);
      try (DataOutputStream out = new DataOutputStream(bytes)) {
        out.writeInt(p.id);
        out.writeLong(p.emitted);
      }
      return bytes.toByteArray();
    }

    @Override
    public Partition deserialize(int version, byte[] data) throws IOException {
      try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(data))) {
        return new Partition(in.readInt(), in.readLong());
      }
    }
  }

  static final class UnassignedSerializer implements SimpleVersionedSerializer<ArrayList<Partition>> {
    private final PartitionSerializer partition = new PartitionSerializer();

    @Override
    public int getVersion() {
      return 1;
    }

    @Override
    public byte[] serialize(ArrayList<Partition> partitions) throws IOException {
      ByteArrayOutputStream bytes = new ByteArrayOutputStream();
      try (DataOutputStream out = new DataOutputStream(bytes)) {
        out.writeInt(partitions.size());
        for (Partition p : partitions) {
          byte[] one = partition.serialize(p);
          out.writeInt(one.length);
          out.write(one);
        }
      }
      return bytes.toByteArray();
    }

    @Override
    public ArrayList<Partition> deserialize(int version, byte[] data) throws IOException {
      ArrayList<Partition> partitions = new ArrayList<>();
      try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(data))) {
        int n = in.readInt();
        for (int i = 0; i < n; i++) {
          byte[] one = new byte[in.readInt()];
          in.readFully(one);
          partitions.add(partition.deserialize(version, one));
        }
      }
      return partitions;
    }
  }

  /** Hands partition i to reader i % parallelism once that reader is registered. */
  static final class Enumerator implements SplitEnumerator<Partition, ArrayList<Partition>> {
    private final SplitEnumeratorContext<Partition> context;
    private final ArrayList<Partition> unassigned;

    Enumerator(SplitEnumeratorContext<Partition> context, List<Partition> unassigned) {
      this.context = context;
      this.unassigned = new ArrayList<>(unassigned);
    }

    @Override
    public void start() {}

    @Override
    public void handleSplitRequest(int subtaskId, String requesterHostname) {}

    @Override
    public void addSplitsBack(List<Partition> splits, int subtaskId) {
      unassigned.addAll(splits);
      assign();
    }

    @Override
    public void addReader(int subtaskId) {
      assign();
    }

    private void assign() {
      int parallelism = context.currentParallelism();
      Iterator<Partition> it = unassigned.iterator();
      while (it.hasNext()) {
        Partition p = it.next();
        int owner = p.id % parallelism;
        if (context.registeredReaders().containsKey(owner)) {
          context.assignSplit(p, owner);
          it.remove();
        }
      }
    }

    @Override
    public ArrayList<Partition> snapshotState(long checkpointId) {
      ArrayList<Partition> copy = new ArrayList<>();
      for (Partition p : unassigned) {
        copy.add(p.copy());
      }
      return copy;
    }

    @Override
    public void close() {}
  }

  static final class BacklogReader implements SourceReader<Long, Partition> {
    private static final int BATCH = 256;
    private static final long IDLE_POLL_MS = 10;

    private final SourceReaderContext context;
    private final String control;
    private final int partitions;
    private final int keys;
    private final List<Partition> owned = new CopyOnWriteArrayList<>();
    private int cursor;
    private Counter recordsIn; // Source__BacklogSource.numRecordsIn, as every real connector counts it

    BacklogReader(SourceReaderContext context, String control, int partitions, int keys) {
      this.context = context;
      this.control = control;
      this.partitions = partitions;
      this.keys = keys;
    }

    @Override
    public void start() {
      // A reader counts what it reads (SourceReaderBase does it for Kafka & co.): the autoscaler's
      // target data rate of a source is numRecordsIn's rate plus the backlog's growth.
      recordsIn = context.metricGroup().getIOMetricGroup().getNumRecordsInCounter();
      // Computed when Flink reads the gauge, so the backlog keeps growing while back-pressure keeps
      // pollNext from running.
      context.metricGroup().setPendingRecordsGauge(() -> backlog(System.currentTimeMillis()));
    }

    private long available(long nowMs) {
      return (long) Math.floor(Control.of(control).arrived(nowMs) / partitions);
    }

    private long backlog(long nowMs) {
      long available = available(nowMs);
      long total = 0;
      for (Partition p : owned) {
        total += Math.max(0, available - p.emitted);
      }
      return total;
    }

    @Override
    public InputStatus pollNext(ReaderOutput<Long> output) {
      int n = owned.size();
      if (n == 0) {
        return InputStatus.NOTHING_AVAILABLE;
      }
      long available = available(System.currentTimeMillis());
      int budget = BATCH;
      long left = 0;
      for (int k = 0; k < n; k++) {
        Partition p = owned.get((cursor + k) % n);
        long emitted = p.emitted;
        while (budget > 0 && emitted < available) {
          output.collect(Math.floorMod(emitted * 31 + p.id, (long) keys));
          emitted++;
          budget--;
        }
        p.emitted = emitted;
        left += available - emitted;
      }
      recordsIn.inc(BATCH - budget);
      cursor = (cursor + 1) % n;
      return left > 0 ? InputStatus.MORE_AVAILABLE : InputStatus.NOTHING_AVAILABLE;
    }

    @Override
    public CompletableFuture<Void> isAvailable() {
      // Arrivals are a function of time, not an event: look again shortly.
      return CompletableFuture.runAsync(
          () -> {}, CompletableFuture.delayedExecutor(IDLE_POLL_MS, TimeUnit.MILLISECONDS));
    }

    @Override
    public List<Partition> snapshotState(long checkpointId) {
      List<Partition> copy = new ArrayList<>();
      for (Partition p : owned) {
        copy.add(p.copy());
      }
      return copy;
    }

    @Override
    public void addSplits(List<Partition> splits) {
      owned.addAll(splits);
    }

    @Override
    public void notifyNoMoreSplits() {}

    @Override
    public void close() {}
  }

  static final class BacklogSource implements Source<Long, Partition, ArrayList<Partition>> {
    private final String control;
    private final int partitions;
    private final int keys;

    BacklogSource(String control, int partitions, int keys) {
      this.control = control;
      this.partitions = partitions;
      this.keys = keys;
    }

    @Override
    public Boundedness getBoundedness() {
      return Boundedness.CONTINUOUS_UNBOUNDED;
    }

    @Override
    public SplitEnumerator<Partition, ArrayList<Partition>> createEnumerator(
        SplitEnumeratorContext<Partition> context) {
      List<Partition> all = new ArrayList<>();
      for (int i = 0; i < partitions; i++) {
        all.add(new Partition(i, 0));
      }
      return new Enumerator(context, all);
    }

    @Override
    public SplitEnumerator<Partition, ArrayList<Partition>> restoreEnumerator(
        SplitEnumeratorContext<Partition> context, ArrayList<Partition> checkpoint) {
      return new Enumerator(context, checkpoint);
    }

    @Override
    public SimpleVersionedSerializer<Partition> getSplitSerializer() {
      return new PartitionSerializer();
    }

    @Override
    public SimpleVersionedSerializer<ArrayList<Partition>> getEnumeratorCheckpointSerializer() {
      return new UnassignedSerializer();
    }

    @Override
    public SourceReader<Long, Partition> createReader(SourceReaderContext context) {
      return new BacklogReader(context, control, partitions, keys);
    }
  }

  // ------------------------------------------------------------------------------------------ work
  /**
   * Spends cost_us per record parked: a capacity of 1e6 / cost_us records/s per subtask, and a busy
   * time of exactly rate * cost_us below that, whatever the machine is doing.
   */
  static final class Work implements MapFunction<Long, Long> {
    private static final long MIN_PARK_NANOS = 1_000_000L;

    private final String control;
    private final double defaultCostUs;
    private long debtNanos; // cost taken on but not yet spent; negative after parking longer than asked

    Work(String control, double defaultCostUs) {
      this.control = control;
      this.defaultCostUs = defaultCostUs;
    }

    @Override
    public Long map(Long value) {
      double cost = Control.of(control).costUs;
      debtNanos += (long) ((Double.isNaN(cost) ? defaultCostUs : cost) * 1000.0);
      if (debtNanos >= MIN_PARK_NANOS) {
        // Park in chunks of at least 1 ms; whatever the park overshoots is owed back by the next records.
        long start = System.nanoTime();
        LockSupport.parkNanos(debtNanos);
        debtNanos -= System.nanoTime() - start;
      }
      return value;
    }
  }

  // ------------------------------------------------------------------------------------------ aggregate
  /** Counts records per key in keyed state, so a rescale redistributes key groups. */
  static final class Aggregate extends KeyedProcessFunction<Long, Long, Long> {
    private transient ValueState<Long> count;

    @Override
    public void open(OpenContext openContext) {
      count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
    }

    @Override
    public void processElement(Long value, Context ctx, Collector<Long> out) throws Exception {
      Long c = count.value();
      long next = c == null ? 1 : c + 1;
      count.update(next);
      if ((next & 1023) == 0) {
        out.collect(next);
      }
    }
  }

  // ------------------------------------------------------------------------------------------ main
  public static void main(String[] args) throws Exception {
    Map<String, String> a = new HashMap<>();
    for (int i = 0; i + 1 < args.length; i += 2) {
      a.put(args[i].replaceFirst("^--", ""), args[i + 1]);
    }
    String control = a.get("control");
    if (control == null) {
      throw new IllegalArgumentException("--control <file> is required");
    }
    int partitions = Integer.parseInt(a.getOrDefault("partitions", "8"));
    int keys = Integer.parseInt(a.getOrDefault("keys", "1024"));
    double costUs = Double.parseDouble(a.getOrDefault("cost-us", "800"));
    long checkpointMs = Long.parseLong(a.getOrDefault("checkpoint-ms", "2000"));
    int maxParallelism = Integer.parseInt(a.getOrDefault("max-parallelism", "128"));

    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    if (checkpointMs > 0) {
      env.enableCheckpointing(checkpointMs);
    }
    env.setMaxParallelism(maxParallelism);
    env.fromSource(
            new BacklogSource(control, partitions, keys),
            WatermarkStrategy.noWatermarks(),
            "BacklogSource",
            Types.LONG)
        .uid("source")
        .setParallelism(Integer.parseInt(a.getOrDefault("source-parallelism", "1")))
        .rebalance()
        .map(new Work(control, costUs))
        .returns(Types.LONG)
        .name("Work")
        .uid("work")
        .setParallelism(Integer.parseInt(a.getOrDefault("work-parallelism", "1")))
        .keyBy(v -> v, Types.LONG)
        .process(new Aggregate())
        .returns(Types.LONG)
        .name("Aggregate")
        .uid("agg")
        .setParallelism(Integer.parseInt(a.getOrDefault("agg-parallelism", "1")))
        .sinkTo(new DiscardingSink<>())
        .name("Sink")
        .uid("sink")
        .setParallelism(Integer.parseInt(a.getOrDefault("agg-parallelism", "1")));
    env.execute(a.getOrDefault("name", "e2e-load-job"));
  }
}
