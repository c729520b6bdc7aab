"""A real gNMI client (pygnmi) for nl6's gNMI tests: one action per run, its result as one JSON document
on stdout. Errors come back as {"error": {"code": "NOT_FOUND", "details": "..."}} so the test can check
the gRPC status. Usage: client.py HOST PORT ACTION ARGS_JSON"""
import json
import sys
import time

import grpc
from pygnmi.client import gNMIclient


def status(err):
    inner = getattr(err, "orig_exc", None) or err
    if isinstance(inner, grpc.RpcError):
        return {"error": {"code": inner.code().name, "details": inner.details()}}
    return {"error": {"code": "CLIENT", "details": str(err)}}


def collect(sub, seconds, limit=100000):
    """Updates of a subscription for `seconds`, each with its arrival time."""
    out, end = [], time.time() + seconds
    while time.time() < end and len(out) < limit:
        try:
            msg = sub.get_update(timeout=max(0.05, end - time.time()))
        except TimeoutError:
            break
        out.append({"arrived": time.time(), "msg": msg})
    return out


def raw_get(host, port, a):
    """A Get pygnmi will not send (it checks encodings against Capabilities itself): grpcio alone."""
    from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc
    with grpc.insecure_channel(f"{host}:{port}") as ch:
        stub = gnmi_pb2_grpc.gNMIStub(ch)
        req = gnmi_pb2.GetRequest(path=[gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=n) for n in a["elems"]])],
                                  encoding=a["encoding"])
        try:
            return {"notifications": len(stub.Get(req, timeout=10).notification)}
        except grpc.RpcError as e:
            return status(e)


def tls_get(host, port, a):
    """A Get over TLS, trusting the lab's self-signed certificate `a["ca"]` for the name `a["name"]`."""
    from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc
    creds = grpc.ssl_channel_credentials(root_certificates=open(a["ca"], "rb").read())
    opts = (("grpc.ssl_target_name_override", a["name"]),)
    with grpc.secure_channel(f"{host}:{port}", creds, options=opts) as ch:
        req = gnmi_pb2.GetRequest(path=[gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=n) for n in a["elems"]])],
                                  encoding=gnmi_pb2.JSON_IETF)
        try:
            n = gnmi_pb2_grpc.gNMIStub(ch).Get(req, timeout=10).notification[0]
            return {"value": json.loads(n.update[0].val.json_ietf_val)}
        except grpc.RpcError as e:
            return status(e)


def main():
    host, port, action = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    a = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    if action == "raw_get":
        return raw_get(host, port, a)
    if action == "tls_get":
        return tls_get(host, port, a)
    kw = {}
    if "user" in a:
        kw = {"username": a["user"], "password": a["password"]}
    try:
        return act(host, port, action, a, kw)
    except Exception as e:  # the status is what the tests check
        return status(e)


def act(host, port, action, a, kw):
    with gNMIclient(target=(host, port), insecure=True, **kw) as gc:
        if True:
            if action == "caps":
                return gc.capabilities()
            if action == "get":
                return gc.get(path=a["paths"], encoding=a.get("encoding", "json_ietf"),
                              datatype=a.get("datatype", "all"))
            if action == "set":
                return gc.set(update=[tuple(u) for u in a.get("update", [])] or None,
                              delete=a.get("delete") or None,
                              encoding=a.get("encoding", "json_ietf"))
            if action in ("stream", "once", "poll"):
                req = {"subscription": a["subs"], "mode": action,
                       "encoding": a.get("encoding", "json_ietf")}
                if action == "stream":
                    sub = gc.subscribe_stream(subscribe=req)
                    got = collect(sub, a.get("seconds", 5))
                elif action == "once":
                    sub = gc.subscribe_once(subscribe=req)
                    got = collect(sub, a.get("seconds", 3))
                else:
                    sub = gc.subscribe_poll(subscribe=req)
                    got = []
                    for _ in range(a.get("polls", 2)):
                        got.append({"arrived": time.time(), "msg": sub.get_update(timeout=5)})
                err = sub.error
                sub.close()
                if err is not None and not got:
                    return status(err)
                return {"updates": got}
    raise SystemExit(f"unknown action {action}")


print(json.dumps(main()))
