# flink-autoscaler: the daemon, with the Java 17 runtime its Spark evaluator needs.
#   docker build -t flink-autoscaler .
#   docker run -v ./config:/etc/flink-autoscaler:ro -v autoscaler-state:/var/lib/flink-autoscaler \
#     -p 9250:9250 flink-autoscaler
# Bookworm, because Debian 13 no longer packages OpenJDK 17.
FROM python:3.11-slim-bookworm

# Versions are left to the Debian release: security updates come with a rebuild.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/flink-autoscaler \
        --shell /usr/sbin/nologin flink-autoscaler \
    && mkdir -p /etc/flink-autoscaler /var/lib/flink-autoscaler/plugins /var/lib/flink-autoscaler/decisions \
    && chown -R flink-autoscaler:flink-autoscaler /var/lib/flink-autoscaler

WORKDIR /opt/flink-autoscaler
COPY pyproject.toml README.md ./
COPY autoscaler ./autoscaler
# The project itself with the Spark Connect client (spark.master sc://...); the bounds are in pyproject.
# hadolint ignore=DL3013
RUN pip install --no-cache-dir ".[connect]" && rm -rf /opt/flink-autoscaler/*

# Listen on all interfaces (the default is loopback only) so Prometheus and probes reach it; keep the
# state database, plugins and decision files on the state volume. Environment variables win over the
# config file: override these with -e, not in config.yaml.
ENV FLINK_AUTOSCALER_METRICS_ADDRESS=0.0.0.0:9250 \
    FLINK_AUTOSCALER_LOG_FORMAT=json \
    FLINK_AUTOSCALER_STATE_URL=sqlite:////var/lib/flink-autoscaler/state.db \
    FLINK_AUTOSCALER_PLUGINS_DIR=/var/lib/flink-autoscaler/plugins \
    FLINK_AUTOSCALER_DECISIONS_DIR=/var/lib/flink-autoscaler/decisions \
    PYTHONUNBUFFERED=1

VOLUME ["/etc/flink-autoscaler", "/var/lib/flink-autoscaler", "/var/lib/flink-autoscaler/plugins"]
WORKDIR /var/lib/flink-autoscaler
# Numeric, so Kubernetes can check runAsNonRoot without reading /etc/passwd.
USER 10001:10001
EXPOSE 9250

HEALTHCHECK --interval=30s --timeout=5s --start-period=2m \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9250/healthz', timeout=4)"]

ENTRYPOINT ["flink-autoscaler"]
CMD ["run", "--config", "/etc/flink-autoscaler/config.yaml"]
