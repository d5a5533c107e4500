# ring-critpath: counts the instructions on a ring round trip's critical
# path, by single-stepping critpath_driver under gdb (critpath.sh runs it).
#
# In a ping-pong every instruction a side executes between seeing the
# peer's tail move and publishing its own tail is on the round trip: on the
# development VM 100 independent ALU instructions added there cost ~8 ns,
# and cutting 104 of the library's cost 2-7 ns (docs/benchmarks.md, ninth
# session). Four segments per round trip:
#   server_read   from the server's poll (RingReader::read in recv) until
#                 recv has returned the request to its caller;
#   server_write  from the caller's reply() until the response's tail is
#                 published;
#   client_read   from the client's poll (RingReader::read in call) until
#                 call() has returned the reply to its caller;
#   client_write  from the caller's next call() until the request's tail is
#                 published.
# The driver's own loop (one compare and a call between segments) is not
# counted; a real caller's is added to these.
import statistics

import gdb

SKIP = int(gdb.parse_and_eval("$wh_skip"))
ROUNDS = int(gdb.parse_and_eval("$wh_rounds"))
DUMP = int(gdb.parse_and_eval("$wh_dump"))  # 1: print each counted instruction


def outer_function():
    f = gdb.newest_frame()
    while f is not None and f.type() == gdb.INLINE_FRAME:
        f = f.older()
    return (f.name() or "?") if f is not None else "?"


def inner_function():
    return gdb.newest_frame().name() or "?"


def word(name):
    return int(gdb.parse_and_eval("*" + name))


def step():
    gdb.execute("stepi", to_string=True)


def count_until(done, segment):
    n = 0
    while not done():
        if DUMP:
            insn = gdb.execute("x/i $pc", to_string=True).split(":", 1)[-1].strip()
            print("dump %s %3d %-40s %s" % (segment, n, inner_function()[:40], insn))
        step()
        n += 1
    return n


def run_until(done, limit=100000):
    for _ in range(limit):
        if done():
            return
        step()
    raise gdb.GdbError("critpath: lost the round trip")


def one_round():
    # At do_reply's first instruction.
    resp0 = word("g_resp_tail")
    server_write = count_until(lambda: word("g_resp_tail") != resp0, "server_write")
    run_until(lambda: outer_function() == "do_call")
    req0 = word("g_req_tail")
    client_write = count_until(lambda: word("g_req_tail") != req0, "client_write")
    run_until(lambda: inner_function() == "wh::ring::RingReader::read")
    client_read = count_until(lambda: outer_function() == "main", "client_read")
    run_until(lambda: outer_function() == "do_recv")
    run_until(lambda: inner_function() == "wh::ring::RingReader::read")
    server_read = count_until(lambda: outer_function() == "main", "server_read")
    run_until(lambda: outer_function() == "do_reply")
    return dict(server_read=server_read, server_write=server_write, client_read=client_read,
                client_write=client_write)


gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("break do_reply")
gdb.execute("run 100000 > /dev/null")
if SKIP:
    gdb.execute("ignore 1 %d" % SKIP)
    gdb.execute("continue")
gdb.execute("delete")
rounds = [one_round() for _ in range(ROUNDS)]
keys = ["server_read", "server_write", "client_read", "client_write"]
for i, r in enumerate(rounds):
    print("round %d: %s total=%d" % (SKIP + i + 1, " ".join("%s=%d" % (k, r[k]) for k in keys),
                                     sum(r.values())))
med = {k: int(statistics.median(r[k] for r in rounds)) for k in keys}
print("critpath_median %s total=%d" % (" ".join("%s=%d" % (k, med[k]) for k in keys),
                                       sum(med.values())))
gdb.execute("kill")
