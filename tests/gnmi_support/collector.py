"""A gNMI dial-out collector for nl6's tests: grpcio's generic handler serving
DialoutTelemetry.Publish (client-streaming SubscribeResponses, the gnmic `listen` shape). Prints
"port N" once it serves, then one JSON line per notification received:
{"target": prefix.target, "subscription": the subscription-name metadata, "updates": n}, and
{"rpc": "Publish"} as each stream opens. MODE (default ok) makes it hostile: "unavailable" ends
every stream with UNAVAILABLE, "huge" answers every stream with one 64 MiB PublishResponse.
Usage: collector.py PORT [MODE] (PORT 0: an ephemeral port)."""
import json
import sys
import threading
import time
from concurrent import futures

import grpc
from pygnmi.spec.v080 import gnmi_pb2


OUT = threading.Lock()
MODE = sys.argv[2] if len(sys.argv) > 2 else "ok"
HUGE = b"\0" * (64 << 20)


def say(line):
    with OUT:  # one whole line at a time from the handler threads
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def publish(requests, context):
    md = dict(context.invocation_metadata())
    say(json.dumps({"rpc": "Publish"}))
    if MODE == "unavailable":
        context.abort(grpc.StatusCode.UNAVAILABLE, "collector overloaded")
    if MODE == "huge":
        return iter((HUGE,))
    context.send_initial_metadata(())
    for r in requests:
        if r.HasField("update"):
            line = json.dumps({"target": r.update.prefix.target,
                               "subscription": md.get("subscription-name", ""),
                               "updates": len(r.update.update)})
            say(line)
    return iter(())


def main():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
    handler = grpc.method_handlers_generic_handler("Nokia.SROS.DialoutTelemetry", {
        "Publish": grpc.stream_stream_rpc_method_handler(
            publish,
            request_deserializer=gnmi_pb2.SubscribeResponse.FromString,
            response_serializer=lambda r: r if isinstance(r, bytes) else b""),
    })
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port(f"127.0.0.1:{sys.argv[1]}")
    if port == 0:
        raise SystemExit(f"cannot bind 127.0.0.1:{sys.argv[1]}")
    server.start()
    print(f"port {port}", flush=True)
    while True:
        time.sleep(3600)


main()
