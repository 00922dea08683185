"""What the daemon reads at start-up: the YAML file and ``FLINK_AUTOSCALER_*`` environment variables.

:class:`Settings` is the file's top level (pydantic-settings: environment variables win over the file),
with one :class:`ClusterSettings` per watched Flink cluster and :class:`SparkSettings` for the evaluator.
The ``autoscaler:`` sections it holds are validated with :class:`AutoscalerOptions` at load time, so a
bad ``job.autoscaler.*`` key stops the daemon before it starts. At some 405 lines it stays one module,
because it is the one place every daemon setting is declared (and docs/configuration.md generated from).
"""

from __future__ import annotations

import base64
import os
import re
import socket
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit, urlunsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from autoscaler.safe_text import remember_secrets
from autoscaler.settings.errors import ConfigError, describe_errors
from autoscaler.settings.options import AutoscalerOptions
from autoscaler.settings.profiles import PROFILES
from autoscaler.settings.values import Duration

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_ENV_PREFIX = "FLINK_AUTOSCALER_"
DECISION_HISTORY = 20  # decisions kept per job by default (decision_history)
MAX_DECISION_HISTORY = 1000
# The per-vertex Prometheus series: every reported gauge (all), the dashboard's set (scaling) or none.
VertexMetrics = Literal["all", "scaling", "off"]
# Default cap on per-vertex series: about 1.5 MB of /metrics however many jobs there are, so a 1,000-job
# daemon's whole page stays near 2 MB (docs/operations.md, "Series budget").
VERTEX_METRICS_MAX_SERIES = 10_000

__all__ = ["ClusterSettings", "Settings", "SparkSettings"]

_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # an HTTP token (RFC 9110)
_HEADER_VALUE = re.compile(r"[\x20-\x7e\t]*")  # visible ASCII, space and tab: what both wires can send


def _secrets_of(raw: Any) -> list[str]:
    """The secrets of a cluster entry as written: its header values, its URL's password and query values."""
    if not isinstance(raw, dict):
        return []
    found: list[str] = []
    headers = raw.get("headers")
    if isinstance(headers, dict):
        found += [v for v in headers.values() if isinstance(v, str)]
    url = raw.get("rest_url")
    if isinstance(url, str):
        try:
            parts = urlsplit(url)
            found += [unquote(parts.password or ""), parts.password or ""]
        except ValueError:
            pass
        else:
            found += [pair.partition("=")[2] for pair in parts.query.split("&")]
    return found


class ClusterSettings(BaseModel):
    """One Flink cluster to watch."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        description="Short name used in job keys (<cluster>/<job name>), metric labels and logs; it must "
        "not contain '/'."
    )
    rest_url: str = Field(
        description="Flink REST endpoint, e.g. http://jobmanager:8081. Credentials in it "
        "(http://user:password@host) become a Basic Authorization header and are never shown; with an "
        "Authorization header in headers too, the configuration is rejected."
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        repr=False,  # credentials: a logged or printed ClusterSettings never shows them
        description="Extra HTTP headers (e.g. auth).",
    )
    verify_tls: bool = Field(True, description="Verify the cluster's TLS certificate.")
    ca_file: Path | None = Field(None, description="CA bundle that signs the cluster's certificate.")
    client_cert: Path | None = Field(None, description="Client certificate for mutual TLS.")
    client_key: Path | None = Field(None, description="Private key of client_cert.")
    request_timeout: Duration | None = Field(
        None,
        description="Deadline of each REST call to this cluster (connect, headers and whole answer); "
        "defaults to job.autoscaler.flink.rest-client.timeout.",
    )
    max_concurrency: int = Field(8, ge=1, description="Concurrent REST requests to this cluster.")
    http_transport: Literal["aiohttp", "httpx"] = Field(
        "aiohttp",
        description="What sends the REST requests: aiohttp (a seventh of httpx's CPU per request, which "
        "a large fleet needs) or httpx with its own transport (httpcore), should a proxy or TLS setup "
        "need it. Both honour HTTP(S)_PROXY and NO_PROXY.",
    )
    metric_fetch_wait: Duration = Field(
        timedelta(seconds=1.5),
        description="How long a tick waits for the metric fetch it started on the JobManager (Flink's "
        "fetcher is lazy), so a sample is whole and fresh rather than mixed or a tick old; 0 disables.",
    )
    autoscaler: dict[str, Any] = Field(
        default_factory=dict, description="job.autoscaler.* keys for every job of this cluster."
    )
    shards: int = Field(
        1,
        ge=1,
        le=4096,
        description="Split the cluster's jobs into this many shards, each with its own lease, so that "
        "several daemons sharing the state database divide the jobs between them (each job is acted on "
        "by one daemon at a time; a dead daemon's shards are taken over after lease_ttl). 1: one lease, "
        "one daemon acts on every job, the others stand by. Every daemon sharing the database must set "
        "the same value; see docs/operations.md, 'Sharding a large cluster'.",
    )

    @model_validator(mode="before")
    @classmethod
    def _remember_secrets(cls, data: Any) -> Any:
        """Its credentials are hidden in every message from here on, even if the entry is invalid."""
        remember_secrets(_secrets_of(data))
        return data

    @field_validator("headers")
    @classmethod
    def _sendable_headers(cls, v: dict[str, str]) -> dict[str, str]:
        """A header neither wire can send fails here, by name: an HTTP library's own error would quote
        the value (an API key), or a non-ASCII one crash the client at start-up."""
        for name, value in v.items():
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"header name {name!r} is not an HTTP token (letters, digits, - and _)")
            if not _HEADER_VALUE.fullmatch(value):
                raise ValueError(
                    f"header {name!r}: its value holds a line break, a control or a non-ASCII character "
                    "(not shown)"
                )
        return v

    @field_validator("name")
    @classmethod
    def _no_slash(cls, v: str) -> str:
        """Job keys are ``<cluster>/<job name>`` and a job name may hold a '/': with one in a cluster name,
        ``prod`` + job ``x/y`` and ``prod/x`` + job ``y`` would share the key ``prod/x/y`` (their state,
        leases, decision files and series), and a key could not be split back into cluster and job."""
        if "/" in v:
            raise ValueError(
                f"cluster {v!r}: a cluster name must not contain '/' (job keys are <cluster>/<job name>, "
                "and a job name may contain '/' itself, so the key could name a job of another cluster)"
            )
        return v

    @model_validator(mode="after")
    def _shardable_name(self) -> ClusterSettings:
        """A sharded cluster's lease rows are named ``<cluster>#<shard>/<shards>`` and
        ``<cluster>@member/<daemon>``: a name holding those separators could be read as another's."""
        if self.shards > 1 and any(c in self.name for c in "#@/"):
            raise ValueError(
                f"cluster {self.name!r}: a sharded cluster's name must not contain '#', '@' or '/'"
            )
        return self

    @field_validator("rest_url")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v.rstrip("/")

    @model_validator(mode="after")
    def _credentials_in_a_header(self) -> ClusterSettings:
        """``http://user:password@host`` becomes a Basic ``Authorization`` header and a URL without them.

        So the password never shows where the URL does (``check-config``, errors, every REST log line),
        and it cannot silently replace an ``Authorization`` header the operator set: both at once is an
        error, since only one of them can be meant.
        """
        parts = urlsplit(self.rest_url)
        if parts.username is None and parts.password is None:
            return self
        if any(k.lower() == "authorization" for k in self.headers):
            raise ValueError(
                f"cluster {self.name!r}: rest_url carries credentials (user:password@) and headers set "
                "Authorization; keep one of them"
            )
        user, password = unquote(parts.username or ""), unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        remember_secrets([token])
        self.headers = {**self.headers, "Authorization": f"Basic {token}"}
        self.rest_url = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
        return self


class SparkSettings(BaseModel):
    """Where the evaluator's SparkSession runs."""

    model_config = ConfigDict(extra="forbid")

    master: str = Field("local[*]", description="local[*], spark://host:7077, or sc://host:15002 (Connect).")
    app_name: str = Field("flink-autoscaler", description="Spark application name.")
    conf: dict[str, str] = Field(default_factory=dict, description="Extra spark.* settings.")


class Settings(BaseSettings):
    """Everything the daemon reads at start-up."""

    model_config = SettingsConfigDict(
        env_prefix="FLINK_AUTOSCALER_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    clusters: list[ClusterSettings] = Field(default_factory=list, description="Flink clusters to watch.")
    control_loop_interval: Duration = Field(
        timedelta(seconds=10), description="Tick period; also the metric sample rate."
    )
    metrics_address: str = Field("127.0.0.1:9250", description="host:port for /metrics; empty disables.")
    vertex_metrics: VertexMetrics = Field(
        "scaling",
        description="Which per-vertex series /metrics exports: all (every reported vertex gauge and the "
        "scaling verification ratio), scaling (parallelism, recommended_parallelism, load, "
        "true_processing_rate and target_data_rate per vertex, lag and catch_up_data_rate per source: what "
        "the Grafana dashboard and the alert rules read) or off (none). Per-job and daemon-wide series are "
        "exported in every mode.",
    )
    vertex_metrics_max_series: int = Field(
        VERTEX_METRICS_MAX_SERIES,
        ge=0,
        description="At most this many per-vertex series, besides the sources' lag (which the StuckBacklog "
        "alert reads); 0 means no limit. A job whose series do not fit beside those already exported "
        "exports none of them (its sources' lag and per-job series stay) until other jobs vanish: counted "
        "by flink_autoscaler_vertex_series_withheld_jobs and _vertex_series_dropped_total, logged once as "
        "vertex_series_limit_reached. The default keeps a 1,000-job daemon's /metrics page near 2 MB.",
    )
    log_format: Literal["console", "json"] = Field("console", description="Log output: console or json.")
    log_level: str = Field("INFO", description="Log level: DEBUG, INFO, WARNING or ERROR.")

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, v: str) -> str:
        level = v.strip().upper()
        if level not in LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
        return level

    @field_validator("vertex_metrics", mode="before")
    @classmethod
    def _off_in_yaml(cls, v: Any) -> Any:
        """YAML reads an unquoted ``off`` as false: ``vertex_metrics: off`` means what it says."""
        return "off" if v is False else v

    @field_validator("metrics_address")
    @classmethod
    def _host_and_port(cls, v: str) -> str:
        """``host:port`` (``[::1]:9250`` for IPv6), or empty: caught here, not by a traceback at start."""
        if not v:
            return v
        host, sep, port = v.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError("must be host:port (e.g. 0.0.0.0:9250), or empty to disable /metrics")
        return v

    spark: SparkSettings = Field(
        default_factory=SparkSettings, description="Where the evaluator's SparkSession runs."
    )
    profile: Literal["recommended", "reference"] = Field(
        "recommended",
        description="The job.autoscaler.* values every job starts from, under the autoscaler: sections "
        "and the job's own keys: recommended (ours, tuned on bench/bench_decisions.py) or reference (the "
        "reference autoscaler's defaults and behaviour, our additions off). See docs/performance.md.",
    )
    autoscaler: dict[str, Any] = Field(
        default_factory=dict, description="job.autoscaler.* defaults for every job (Flink-style keys)."
    )
    state_url: str = Field(
        "sqlite:///flink-autoscaler.db",
        description="Where per-job state (scaling history, pending rescale, delayed scale-downs, cooldowns, "
        "overrides), the metric window and events are kept: sqlite:///PATH (a file; sqlite:////abs/path "
        "for an absolute path), postgresql+psycopg://USER@HOST:PORT/DB to share one database between "
        "daemons watching different clusters, or memory:// to keep nothing across restarts. The schema is "
        "created and migrated at start-up.",
    )

    @field_validator("state_url")
    @classmethod
    def _state_scheme(cls, v: str) -> str:
        """A scheme the state store can open: caught here, not by a traceback at start."""
        if v.startswith("memory://"):
            return v
        scheme = v.partition("://")[0].partition("+")[0]
        if scheme not in ("sqlite", "postgresql") or "://" not in v:
            raise ValueError("must be sqlite:///PATH, postgresql+psycopg://USER@HOST:PORT/DB or memory://")
        return v

    event_retention: Duration = Field(
        timedelta(days=90),
        description="How long events stay in the state database; older ones are deleted once a day. "
        "0 keeps them forever (the reference's jdbc.event-handler.ttl).",
    )
    persist_window: bool = Field(
        True,
        description="Store each tick's samples so a restarted daemon resumes its metric window instead of "
        "waiting a full metrics.window.",
    )
    decisions_dir: Path | None = Field(
        Path("flink-autoscaler-decisions"),
        description="Where the daemon writes each job's last decisions (per job the newest as JSON and up to "
        "decision_history - 1 earlier ones as JSON lines), read by "
        "'flink-autoscaler status' and 'explain'. Relative to the working directory, like the default "
        "state_url; null disables it.",
    )
    decision_history: int = Field(
        DECISION_HISTORY,
        ge=1,
        le=MAX_DECISION_HISTORY,
        description="Decisions kept per job in decisions_dir, for 'explain --last N'. A run of ticks that "
        "decided the same is one decision, so 20 reach back over the last rescales and what led to them; "
        "a job's file grows by a few kB per decision kept.",
    )
    archive_dir: Path | None = Field(
        None,
        description="Where the daemon archives each tick's samples and decisions as Parquet, partitioned "
        "by cluster, job and UTC day, for backtests (docs/backtest.md); null (the default) disables it. "
        "It must be a directory the daemon can create and write.",
    )
    archive_retention_days: int = Field(
        30,
        ge=0,
        le=36500,
        description="Full UTC days of archive kept before today: older day partitions are deleted (at a "
        "flush, at most once an hour). 0 keeps everything.",
    )
    archive_flush_interval: Duration = Field(
        timedelta(minutes=15),
        description="How long archive rows are buffered before they are written, one Parquet file per "
        "cluster, job and day at each flush (and at shutdown); a crash loses at most this much. "
        "Between 1 s and 1 d.",
    )
    plugins_dir: Path | None = Field(
        None, description="Directory of executor-plugin wheels loaded at start-up (besides installed ones)."
    )
    confirm_timeout: Duration = Field(
        timedelta(minutes=5),
        description="How long a rescale may take to show in /jobs/:id before it is reported stuck.",
    )
    instance_id: str = Field(
        default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}",
        json_schema_extra={"doc_default": "*hostname*`:`*pid*"},
        min_length=1,
        max_length=256,
        description="This daemon's name in the cluster leases of the state database (default: "
        "hostname:pid). A stable one (the host name under systemd) lets a restarted daemon take its "
        "clusters back at once instead of after lease_ttl.",
    )
    lease_ttl: Duration | None = Field(
        None,
        description="How long a daemon's claim on a cluster lasts unless renewed (every tick). Daemons "
        "sharing a state database act on a cluster one at a time; the others stand by and take over "
        "this long after the holder stopped renewing (at once after a clean shutdown). Default: "
        "max(60 s, 3 x control_loop_interval); at least 2 x control_loop_interval.",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The YAML file arrives as init kwargs (see load()); env vars must win over it.
        return (env_settings, init_settings)

    @field_validator("clusters")
    @classmethod
    def _unique_names(cls, v: list[ClusterSettings]) -> list[ClusterSettings]:
        names = [c.name for c in v]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"cluster names must be unique, repeated: {', '.join(dupes)}")
        return v

    @field_validator("archive_flush_interval")
    @classmethod
    def _flush_interval(cls, v: timedelta) -> timedelta:
        if not timedelta(seconds=1) <= v <= timedelta(days=1):
            raise ValueError("must be between 1 s and 1 d")
        return v

    @field_validator("archive_dir", mode="before")
    @classmethod
    def _archive_dir(cls, v: Any) -> Any:
        """Empty (an unset environment variable's way) disables it; a file is caught here, and whether
        the directory can be written when the daemon starts (``autoscaler.archive.open_archive``)."""
        if isinstance(v, str) and not v.strip():
            return None
        if v is not None and Path(v).is_file():
            raise ValueError(f"must be a directory, and {str(v)!r} is a file")
        return v

    @model_validator(mode="after")
    def _lease_outlives_a_tick(self) -> Settings:
        if self.lease_ttl is not None and self.lease_ttl < 2 * self.control_loop_interval:
            raise ValueError(
                f"lease_ttl ({self.lease_ttl.total_seconds():g} s) must be at least twice "
                f"control_loop_interval ({self.control_loop_interval.total_seconds():g} s), or a "
                "daemon could lose its clusters between two ticks"
            )
        return self

    @property
    def effective_lease_ttl(self) -> timedelta:
        return self.lease_ttl or max(timedelta(seconds=60), 3 * self.control_loop_interval)

    @model_validator(mode="after")
    def _options_valid(self) -> Settings:
        base = self._daemon_options()
        for cluster in self.clusters:
            AutoscalerOptions.from_flink_conf(
                cluster.autoscaler, base, source=f"clusters[{cluster.name}].autoscaler"
            )
        return self

    def _daemon_options(self) -> AutoscalerOptions:
        """The profile, then the daemon's ``autoscaler:`` section over it."""
        profile = AutoscalerOptions.from_flink_conf(PROFILES[self.profile], source=f"profile {self.profile}")
        return AutoscalerOptions.from_flink_conf(self.autoscaler, profile, source="autoscaler")

    def option_warnings(self) -> list[str]:
        """Keys of the ``autoscaler:`` sections that no option reads (misspelled, most likely), and
        values that are valid but hardly meant (:meth:`AutoscalerOptions.warnings`)."""
        out = [f"autoscaler: {w}" for w in AutoscalerOptions.unknown_keys(self.autoscaler)]
        out += [f"autoscaler: {w}" for w in self._daemon_options().warnings()]
        for cluster in self.clusters:
            where = f"clusters[{cluster.name}].autoscaler"
            out += [f"{where}: {w}" for w in AutoscalerOptions.unknown_keys(cluster.autoscaler)]
            out += [f"{where}: {w}" for w in self.options_for(cluster).warnings()]
        return list(dict.fromkeys(out))

    def options_for(self, cluster: ClusterSettings) -> AutoscalerOptions:
        base = self._daemon_options()
        return AutoscalerOptions.from_flink_conf(cluster.autoscaler, base, source=f"clusters[{cluster.name}]")

    @classmethod
    def load(cls, path: str | Path | None = None, **overrides: Any) -> Settings:
        """Read the YAML file (if any), then env vars; raise ConfigError naming every bad key."""
        data: dict[str, Any] = {}
        source = "defaults"
        if path is not None:
            source = str(path)
            try:
                loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
            except OSError as exc:
                raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
            except yaml.YAMLError as exc:
                raise ConfigError(f"config file {path} is not valid YAML: {_yaml_problem(exc)}") from exc
            if loaded is None:
                loaded = {}
            if not isinstance(loaded, dict):
                raise ConfigError(f"config file {path} must hold a mapping at the top level")
            data = {k.replace("-", "_"): v for k, v in loaded.items()}
        data.update(overrides)
        try:
            return cls(**data)
        except SettingsError as exc:  # an environment variable that should hold JSON does not
            raise ConfigError(
                f"invalid configuration from the environment: {exc} (a FLINK_AUTOSCALER_* variable for a "
                f"list or mapping, such as FLINK_AUTOSCALER_CLUSTERS or FLINK_AUTOSCALER_SPARK__CONF, "
                f"must hold JSON; the cause: {exc.__cause__ or 'unknown'})"
            ) from exc
        except ConfigError as exc:
            raise ConfigError(f"{exc} (in {_sources(source, _OPTION_SECTIONS)})") from exc
        except ValidationError as exc:
            nested = [e for e in exc.errors() if isinstance(e.get("ctx", {}).get("error"), ConfigError)]
            if nested:
                where = _sources(source, _OPTION_SECTIONS)
                raise ConfigError(f"{nested[0]['ctx']['error']} (in {where})") from exc
            blamed = [_env_var(err["loc"]) for err in exc.errors()]
            from_file = source if any(var is None for var in blamed) else None
            where = _where(from_file, [var for var in blamed if var is not None])
            raise ConfigError(describe_errors(exc, where, _key_or_env_var)) from exc


# The settings an option error (``AutoscalerOptions`` of an ``autoscaler:`` section) may come from.
_OPTION_SECTIONS = (("autoscaler",), ("clusters",))


def _env_var(loc: tuple[int | str, ...]) -> str | None:
    """The ``FLINK_AUTOSCALER_*`` variable that set the value at ``loc`` (a validation error's place),
    if one did: environment variables win over the file, so an error there is the variable's, and the
    message must name it, not the file (issue 35). A variable sets a whole field (``..._LOG_LEVEL``,
    ``..._CLUSTERS`` as JSON) or a nested one (``..._SPARK__MASTER``); the longest match is the one."""
    present = {name.upper(): name for name in os.environ}
    for n in range(len(loc), 0, -1):
        parts = loc[:n]
        if all(isinstance(p, str) for p in parts):
            name = present.get(_ENV_PREFIX + "__".join(str(p) for p in parts).upper())
            if name is not None:
                return name
    return None


def _key_or_env_var(key: str) -> str:
    """A top-level key as an error names it: the variable that set it, if one did."""
    return _env_var((key,)) or key


def _where(path: str | None, variables: list[str], joiner: str = "and") -> str:
    """``in <where>`` of an error message: the file, the environment variables, or both (``joiner``:
    "and" when errors come from each, "or" when the error's source cannot be told apart)."""
    said = list(dict.fromkeys(variables))
    env = f"the environment variable{'s' if len(said) > 1 else ''} {', '.join(said)}" if said else ""
    if path is not None and env:
        return f"{path} {joiner} {env}"
    return env or path or "defaults"


def _sources(path: str, fields: tuple[tuple[str, ...], ...]) -> str:
    """Where an error of one of ``fields`` may come from: the file, or the variables that set them
    (merged with the file's sections, so either may hold the key)."""
    variables = [var for loc in fields if (var := _env_var(loc)) is not None]
    variables += [
        name
        for name in os.environ
        for loc in fields
        if name.upper().startswith(_ENV_PREFIX + loc[0].upper() + "__")
    ]
    return _where(None if path == "defaults" and variables else path, variables, "or")


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """What is wrong and where, without the excerpt of the file PyYAML quotes: that line may hold a
    password or a token, so the message names line and column only."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return type(exc).__name__
    parts = [
        f"{text} (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else text
        for text, mark in ((exc.context, exc.context_mark), (exc.problem, exc.problem_mark))
        if text
    ]
    return "; ".join(parts) or type(exc).__name__
