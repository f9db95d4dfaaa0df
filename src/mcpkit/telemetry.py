"""OpenTelemetry for tool calls: one span per call and the call metrics, through the OTel SDK.

    Server("orders", tools=[...], middleware=[Telemetry()])
    server.run_http(metrics=True)        # Prometheus text at GET /metrics, behind the MCP port's auth
    server.run_http(metrics_port=9464)   # or on a listener of its own at 127.0.0.1:9464, no auth

`Telemetry` is a middleware of the call chain (`mcpkit.pipeline`). The official SDK already opens a
SERVER span per message (`mcp.server._otel.OpenTelemetryMiddleware`, on by default, `tools/call
<name>`, with the W3C trace context from `_meta`); `Telemetry` adds mcpkit's facts to that span
instead of opening a second one (outcome code, principal, call id, cache hit), and opens its own
span only when no recording span surrounds the call (the SDK's middleware removed, or a tracer
provider handed to `Telemetry` alone, as tests do). Metrics (no principal and no client-chosen
name in any label, so their cardinality stays bounded):

    mcpkit.tool.calls            counter         tool, code       every call, by outcome code
    mcpkit.tool.errors           counter         tool, code       calls whose code is not OK
    mcpkit.tool.duration         histogram (s)   tool, code       wall time of the chain
    mcpkit.tool.in_flight        up-down counter tool             calls running now
    mcpkit.rate_limit.refusals   counter         tool             calls refused RATE_LIMITED

Without an SDK installed as the global provider (and no provider handed to `Telemetry`) the
middleware only checks that, per call, and passes the call on (a few microseconds, see
bench/telemetry_overhead.py). `configure` installs the SDK: OTLP export when the standard
`OTEL_EXPORTER_OTLP_*ENDPOINT` variables ask for it, and the Prometheus reader that `/metrics` serves.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any

import anyio
from opentelemetry import metrics, trace
from opentelemetry.metrics._internal import _ProxyMeterProvider  # the API's "none installed" marker
from opentelemetry.trace import SpanKind, StatusCode

from mcpkit.errors import ToolError
from mcpkit.pipeline import Call, CallNext, UnknownTool
from mcpkit.result import Outcome

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["Telemetry", "configure", "metrics_endpoint"]

log = logging.getLogger("mcpkit.telemetry")

_SCOPE = "mcpkit"
#: Latency buckets (seconds): tool calls run from sub-millisecond cache hits to 30 s deadlines.
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Telemetry:
    """Middleware: the call's span attributes and the call metrics (see the module docstring).

    Args:
        tracer_provider: Where spans go; None: the global provider (set by `configure` or by
            `opentelemetry-instrument`).
        meter_provider: Where metrics go; None: the global provider.
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self._explicit = tracer_provider is not None or meter_provider is not None
        self._tracer = trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(_SCOPE, meter_provider=meter_provider)
        self._calls = meter.create_counter("mcpkit.tool.calls", "{call}", "Tool calls, by outcome code")
        self._errors = meter.create_counter("mcpkit.tool.errors", "{call}", "Tool calls that failed, by code")
        self._duration = meter.create_histogram(
            "mcpkit.tool.duration",
            "s",
            "Tool call duration",
            explicit_bucket_boundaries_advisory=list(_BUCKETS),
        )
        self._in_flight = meter.create_up_down_counter(
            "mcpkit.tool.in_flight", "{call}", "Tool calls running"
        )
        self._refusals = meter.create_counter(
            "mcpkit.rate_limit.refusals", "{call}", "Tool calls refused by a rate limit"
        )

    async def __call__(self, call: Call, call_next: CallNext) -> Outcome:
        if not self._explicit and _no_sdk():  # nothing would record: skip the no-op API calls
            return await call_next(call)
        # A name the server does not serve is the client's choice: one label for all of them.
        tool = call.name if call.tool is not None else "(unknown)"
        labels: dict[str, str] = {"tool": tool}
        span = trace.get_current_span()
        own = None
        if not span.is_recording():
            own = self._tracer.start_span(f"tools/call {tool}", kind=SpanKind.SERVER)
            span = own
        span.set_attributes(_call_attributes(call))
        started = time.perf_counter()
        self._in_flight.add(1, labels)
        code = "INTERNAL"
        try:
            if own is None:
                outcome = await call_next(call)
            else:
                with trace.use_span(own, end_on_exit=False):  # child spans (SQL) nest under it
                    outcome = await call_next(call)
            code = outcome.code or "OK"
            return outcome
        except UnknownTool:
            code = "UNKNOWN_TOOL"
            raise
        except anyio.get_cancelled_exc_class():
            code = "CANCELLED"
            raise
        except ToolError as err:
            code = err.code
            raise
        finally:
            self._in_flight.add(-1, labels)
            coded = {"tool": tool, "code": code}
            self._calls.add(1, coded)
            self._duration.record(time.perf_counter() - started, coded)
            span.set_attribute("mcpkit.outcome", code)
            span.set_attribute("mcpkit.cached", call.cached)
            if code != "OK":
                self._errors.add(1, coded)
                span.set_status(StatusCode.ERROR, code)
            if code == "RATE_LIMITED":
                self._refusals.add(1, labels)
            if own is not None:
                own.end()


def _no_sdk() -> bool:
    """Neither a tracer nor a meter provider is installed yet (checked per call: one may come later)."""
    return isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider) and isinstance(
        metrics.get_meter_provider(), _ProxyMeterProvider
    )


def _call_attributes(call: Call) -> dict[str, Any]:
    attributes: dict[str, Any] = {"gen_ai.tool.name": call.name[:128], "mcpkit.call_id": call.call_id}
    if call.principal is not None:
        attributes["enduser.id"] = call.principal
    return attributes


_configured = False


def configure(service_name: str, *, prometheus: bool = False) -> bool:
    """Install the OpenTelemetry SDK as the global tracer and meter providers, when asked for.

    Traces (metrics) are exported over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` or
    `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (`..._METRICS_ENDPOINT`) is set, unless
    `OTEL_TRACES_EXPORTER` (`OTEL_METRICS_EXPORTER`) is `none`; the exporters read the other
    standard variables (headers, protocol, timeouts) themselves. `prometheus` adds the reader that
    `/metrics` serves. Nothing is installed when nothing asks for it, under `OTEL_SDK_DISABLED=true`,
    or when a provider is already installed (by `opentelemetry-instrument`, say): that one is used.
    `OTEL_SERVICE_NAME` wins over `service_name`. Needs the `telemetry` extra.

    Returns:
        Whether this call installed anything.
    """
    global _configured
    env = os.environ
    if _configured or env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    traces = _wants_otlp("TRACES")
    otlp_metrics = _wants_otlp("METRICS")
    if not (traces or otlp_metrics or prometheus):
        return False
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({} if env.get("OTEL_SERVICE_NAME") else {"service.name": service_name})
    installed = False
    if traces and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        installed = True
    readers: list[MetricReader] = []
    if otlp_metrics:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    if prometheus:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader

        readers.append(PrometheusMetricReader())
    if readers:
        if isinstance(metrics.get_meter_provider(), _ProxyMeterProvider):
            metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))
            installed = True
        else:
            log.warning("a meter provider is already installed: /metrics and OTLP metrics use it as it is")
    _configured = True
    return installed


def _wants_otlp(signal: str) -> bool:
    env = os.environ
    if env.get(f"OTEL_{signal}_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT"))


async def metrics_endpoint(request: Request) -> Response:
    """`GET /metrics`: the Prometheus text format of what the Prometheus reader collected."""
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
    from starlette.responses import Response

    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
