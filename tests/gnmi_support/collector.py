"""A gNMI dial-out collector for nl6's tests: grpcio's generic handler serving
DialoutTelemetry.Publish (client-streaming SubscribeResponses, the gnmic `listen` shape). Prints
"port N" once it serves, then one JSON line per notification received:
{"target": prefix.target, "subscription": the subscription-name metadata, "updates": n}.
Usage: collector.py PORT (0: an ephemeral port)."""
import json
import sys
import threading
import time
from concurrent import futures

import grpc
from pygnmi.spec.v080 import gnmi_pb2


OUT = threading.Lock()


def publish(requests, context):
    md = dict(context.invocation_metadata())
    context.send_initial_metadata(())
    for r in requests:
        if r.HasField("update"):
            line = json.dumps({"target": r.update.prefix.target,
                               "subscription": md.get("subscription-name", ""),
                               "updates": len(r.update.update)})
            with OUT:  # one whole line at a time from the handler threads
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
    return iter(())


def main():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
    handler = grpc.method_handlers_generic_handler("Nokia.SROS.DialoutTelemetry", {
        "Publish": grpc.stream_stream_rpc_method_handler(
            publish,
            request_deserializer=gnmi_pb2.SubscribeResponse.FromString,
            response_serializer=lambda _: b""),
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
