#!/usr/bin/env python3
"""Driver for Benchmarks/noisy-neighbour.sh (Python 3 standard library only).

Subcommands:
  run      one pattern: start a fresh server on a copy of the seeded database, set the
           pattern up, run the victim and 4 attackers at once, read the server's peak RSS,
           stop it, append one JSON result line to --results.
  report   print the table of a results file (and write it to --output).
  victim, attacker   internal: one client process each, started by `run`; they print one
           JSON object on standard output when done.

The victim is anonymous (except in `writer`, `anonymous-bodies` and `playlist-moves`,
where it also posts with an editor key of its own), binds 127.0.0.2 and sends one request
every 20 ms over one keep-alive connection (the next one at once when an answer is late),
timing each from send to the last byte of the answer. Attacker i binds 127.0.0.(10+i). A
victim request that fails (connection error, timeout, or any status but 2xx) counts as an
error and as infinitely slow in its percentiles, so p99 is only finite when 99% were
answered. In `behind-proxy` the victim and the attackers connect to an nginx in front of
the server instead.
"""

import argparse
import asyncio
import errno
import json
import os
import random
import resource
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import types
import http.client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from noisy.common import *  # noqa: E402,F401,F403 (settings, request helpers, the victim)
from noisy.attacker import attacker_main  # noqa: E402
from noisy.patterns import SETUPS  # noqa: E402


# ---------------------------------------------------------------------------------------
# One pattern

def read_status(pid):
    values = {}
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(("VmHWM:", "VmRSS:")):
                    values[line.split(":")[0]] = int(line.split()[1])
    except OSError:
        pass
    return values


class Watchdog(threading.Thread):
    """Samples the server's RSS every 50 ms; kills it past the cap (so an abuse pattern
    cannot take the machine's memory from everyone else)."""

    def __init__(self, process, cap_kib):
        super().__init__(daemon=True)
        self.process, self.cap_kib = process, cap_kib
        self.peak_kib = 0
        self.killed = False
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.wait(0.05):
            if self.process.poll() is not None:
                return
            values = read_status(self.process.pid)
            self.peak_kib = max(self.peak_kib, values.get("VmHWM", 0), values.get("VmRSS", 0))
            if self.cap_kib and values.get("VmRSS", 0) > self.cap_kib:
                self.killed = True
                self.process.kill()
                return


def port_free(port):
    probe = socket.socket()
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((HOST, port))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def wait_ready(port, process, seconds=20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            status, _ = http_call(port, "GET", "/readyz", timeout=1.0)
            if status == 200:
                return True
        except Exception:  # noqa: BLE001
            pass
        time.sleep(0.1)
    return False


def server_version(port, key):
    try:
        status, body = http_call(port, "GET", "/metrics", key, timeout=5.0)
        if status == 200:
            for line in body.decode("utf-8", "replace").splitlines():
                if line.startswith("catalog_build_info{"):
                    labels = dict(part.split("=", 1) for part in line[line.index("{") + 1:line.index("}")].split(","))
                    return {name: value.strip('"') for name, value in labels.items()}
    except Exception:  # noqa: BLE001
        pass
    return {}


def metrics_sample(port, key):
    """What the server's metrics say now: streams, long-polls, connections, refusals by reason."""
    status, body = http_call(port, "GET", "/metrics", key, timeout=5.0)
    if status != 200:
        raise RuntimeError(f"/metrics answered {status}")
    values = {}
    for line in body.decode("utf-8", "replace").splitlines():
        if line.startswith(("catalog_change_feed_streams ", "catalog_change_feed_waiting ",
                            "catalog_http_open_connections ")):
            name, value = line.split()
            values[name] = float(value)
        elif line.startswith("catalog_http_rejected_total{"):
            reason = line[line.index('"') + 1:line.rindex('"')]
            if float(line.split()[-1]):
                values["rejected:" + reason] = float(line.split()[-1])
    return values


def describe_metrics(values):
    note = (f"near the window's end {values.get('catalog_change_feed_streams', 0):.0f} streams, "
            f"{values.get('catalog_change_feed_waiting', 0):.0f} long-polls waiting, "
            f"{values.get('catalog_http_open_connections', 0):.0f} connections open")
    refused = {name[9:]: int(value) for name, value in values.items() if name.startswith("rejected:")}
    return note + ("; refused so far " + format_counts(refused) if refused else "")


def postgres(database):
    return database.startswith(("postgres://", "postgresql://"))


def count_games(database):
    """The games the database holds (sqlite3 for a file, psql for PostgreSQL)."""
    if postgres(database):
        made = subprocess.run(["psql", "-tAq", database, "-c", "SELECT count(*) FROM games"],
                              capture_output=True, text=True, check=True)
        return int(made.stdout.strip())
    import sqlite3
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        return connection.execute("SELECT count(*) FROM games").fetchone()[0]
    finally:
        connection.close()


KIND_LABELS = {"POST": "POST", "FEED": "feed GET"}  # the victim's requests besides its GET


def summarize_victim(result):
    samples = result.get("samples", {})
    merged = [value for values in samples.values() for value in values]
    infinite = float("inf")
    ordered = sorted(infinite if value is None else value for value in merged)
    summary = {
        "requests": len(merged),
        "errors": sum(1 for value in merged if value is None),
        "failures": result.get("failures", {}),
        "p50": percentile(ordered, 50),
        "p99": percentile(ordered, 99),
        "max": ordered[-1] if ordered else None,
        "kinds": list(samples),
    }
    if len(samples) > 1:
        for kind, values in samples.items():
            kind_ordered = sorted(infinite if value is None else value for value in values)
            summary[kind.lower() + "_p50"] = percentile(kind_ordered, 50)
            summary[kind.lower() + "_p99"] = percentile(kind_ordered, 99)
    return summary


def run_pattern(args):
    raise_file_limit()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that `finally` stops the server
    pattern = args.pattern
    work = args.workdir
    result = {"pattern": pattern, "notes": [], "engine": "postgresql" if postgres(args.database) else "sqlite"}
    if pattern == "behind-proxy" and not os.access(NGINX, os.X_OK):
        result["skipped"] = f"skipped: no {NGINX} (apt-get install nginx-light)"
        with open(args.results, "a") as out:
            out.write(json.dumps(result) + "\n")
        print(format_row(result), file=sys.stderr)
        return
    ids = [line.strip() for line in open(args.ids) if line.strip()]
    key = args.admin_key
    migrations = ["--migrations", args.migrations] if args.migrations else []
    victim_key = None
    if pattern in VICTIM_WRITES:
        made = subprocess.run([args.server, "keys", "create", "--role", "editor", "--name", "victim",
                               "--database", args.database] + migrations,
                              capture_output=True, text=True, check=True)
        victim_key = made.stdout.strip().splitlines()[-1]
    if not port_free(args.port):
        raise SystemExit(f"port {args.port} is taken: stop whatever listens there")
    proxy_port = args.port + 1000  # nginx's, in behind-proxy
    proxy_flags = []
    if pattern == "behind-proxy":
        if not port_free(proxy_port):
            raise SystemExit(f"port {proxy_port} is taken: stop whatever listens there")
        proxy_flags = ["--trusted-proxies", "127.0.0.1", "--proxy-client-address", "x-forwarded-for"]
    backups = os.path.join(work, "backups")
    command = [args.server, "--port", str(args.port), "--database", args.database, "--no-seed",
               "--log-level", "warning", "--backup-dir", backups] + migrations + proxy_flags + args.server_flags.split()
    log = open(os.path.join(work, "server.log"), "wb")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=args.cwd)
    children = []
    watchdog = None
    nginx = None
    try:
        try:
            with open(f"/proc/{server.pid}/oom_score_adj", "w") as adjust:
                adjust.write("1000")  # if memory runs out, the benchmarked server goes first
        except OSError:
            pass
        if not wait_ready(args.port, server):
            raise RuntimeError(f"the server did not become ready; log:\n{tail(work)}")
        watchdog = Watchdog(server, args.rss_cap_mib * 1024)
        watchdog.start()
        result["version"] = server_version(args.port, key)

        config = {"pattern": pattern, "port": args.port, "admin_key": key, "ids": ids[:2000],
                  "victim_item": ids[0], "duration": args.duration, "victim_key": victim_key}
        setup_started = time.monotonic()
        games_before = 0
        # The pattern's own set-up (its module's `setup`), given what it may need.
        context = types.SimpleNamespace(args=args, port=args.port, key=key, ids=ids, config=config, notes=result["notes"],
                                        work=work, proxy_port=proxy_port, nginx=None)
        if pattern in SETUPS:
            SETUPS[pattern](context)
        nginx = context.nginx
        if pattern == "deferred-queue" and postgres(args.database):
            games_before = count_games(args.database)  # a shared database keeps earlier games
        result["setup_seconds"] = round(time.monotonic() - setup_started, 1)
        if result["setup_seconds"] >= 2:
            result["notes"].append(f"setup {result['setup_seconds']:.0f} s")
        if server.poll() is not None:
            raise RuntimeError(f"the server exited during setup; log:\n{tail(work)}")

        config["start"] = time.monotonic() + 1.5
        config_path = os.path.join(work, "config.json")
        with open(config_path, "w") as out:
            json.dump(config, out)
        me = os.path.abspath(__file__)
        victim = subprocess.Popen([sys.executable, me, "victim", config_path], stdout=subprocess.PIPE)
        children.append(victim)
        attackers = []
        if pattern != "baseline":
            for index in range(1 if pattern == "anonymous-bodies" else ATTACKERS):
                attacker = subprocess.Popen([sys.executable, me, "attacker", config_path, str(index)],
                                            stdout=subprocess.PIPE, preexec_fn=lambda: os.nice(args.attacker_nice))
                attackers.append(attacker)
                children.append(attacker)
        limit = config["start"] + args.duration + VICTIM_TIMEOUT + 15
        if pattern in SAMPLED:  # the server's view, while the attackers still hold what they hold
            time.sleep(max(0.0, config["start"] + args.duration - min(1.0, args.duration / 4) - time.monotonic()))
            try:
                result["notes"].append(describe_metrics(metrics_sample(args.port, key)))
            except Exception as error:  # noqa: BLE001
                result["notes"].append(f"metrics not read ({failure_name(error)})")
        outputs = []
        for child in [victim] + attackers:
            try:
                out, _ = child.communicate(timeout=max(1.0, limit - time.monotonic()))
                outputs.append(json.loads(out or b"{}"))
            except subprocess.TimeoutExpired:
                child.kill()
                child.communicate()
                outputs.append({"counts": {"driver-hung": 1}})
            except ValueError:
                outputs.append({"counts": {"driver-error": 1}})
        result["victim"] = summarize_victim(outputs[0])
        counts, notes = {}, {}
        for output in outputs[1:]:
            for name, value in output.get("counts", {}).items():
                counts[name] = counts.get(name, 0) + value
            for name, value in output.get("notes", {}).items():
                notes[name] = max(notes.get(name, 0), value)
        result["attackers"] = counts if pattern != "baseline" else None
        if "metrics_bytes" in notes:
            result["notes"].append(f"/metrics grew to {notes['metrics_bytes'] / 1024:.0f} KiB, "
                                   f"slowest {notes['metrics_seconds'] * 1000:.0f} ms")
        sizes = sorted((name[6:], value) for name, value in notes.items() if name.startswith("bytes:"))
        if sizes:
            result["notes"].append("attackers' largest answers " + ", ".join(
                f"{name}: {value / 1024:.1f} KiB" for name, value in sizes))
        stop_nginx(nginx)

        # The server after the window: alive? answering? its peak RSS.
        values = read_status(server.pid) if server.poll() is None else {}
        watchdog.stopping.set()
        watchdog.join()
        result["peak_rss_kib"] = max(values.get("VmHWM", 0), watchdog.peak_kib)
        if server.poll() is not None:
            if watchdog.killed:
                result["server"] = f"killed by the benchmark at the {args.rss_cap_mib} MiB RSS cap"
            else:
                result["server"] = describe_exit(server.returncode)
                result["log_tail"] = tail(work)
        else:
            try:
                status, _ = http_call(args.port, "GET", "/healthz", timeout=5.0)
                result["server"] = "ok" if status == 200 else f"/healthz answered {status} after the window"
            except Exception as error:  # noqa: BLE001
                result["server"] = f"/healthz failed after the window ({failure_name(error)})"
            stopped = time.monotonic()
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=args.stop_timeout)
                seconds = time.monotonic() - stopped
                if seconds > 3:
                    result["notes"].append(f"graceful stop took {seconds:.1f} s")
                if server.returncode != 0:
                    result["notes"].append(f"stopped with {describe_exit(server.returncode)}")
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
                result["notes"].append(f"no graceful stop within {args.stop_timeout:.0f} s (killed)")
        if pattern == "deferred-queue" and server.returncode is not None:
            try:
                games = count_games(args.database) - games_before
                result["notes"].append(f"the server created {games} games")
            except Exception as error:  # noqa: BLE001
                result["notes"].append(f"games not counted ({error})")
        if pattern == "backups":
            files, size = 0, 0
            for root, _, names in os.walk(backups):
                for name in names:
                    files += 1
                    size += os.path.getsize(os.path.join(root, name))
            result["notes"].append(f"backup dir holds {files} files, {size / 1048576:.0f} MiB")
        if result["victim"].get("get_p99") is not None:
            v = result["victim"]
            result["notes"].append(f"victim GET p50/p99 {fmt_ms(v['get_p50'])}/{fmt_ms(v['get_p99'])}, " + ", ".join(
                f"{KIND_LABELS.get(kind, kind)} p50/p99 {fmt_ms(v[kind.lower() + '_p50'])}/{fmt_ms(v[kind.lower() + '_p99'])}"
                for kind in v.get("kinds", []) if kind != "GET"))
        if result["victim"]["failures"]:
            result["notes"].append("victim got " + format_counts(result["victim"]["failures"]))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
        stop_nginx(nginx)
        if watchdog is not None:
            watchdog.stopping.set()
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()
    with open(args.results, "a") as out:
        out.write(json.dumps(result) + "\n")
    print(format_row(result), file=sys.stderr)


def describe_exit(code):
    if code is None:
        return "running"
    if code < 0:
        try:
            return f"server died of {signal.Signals(-code).name}"
        except ValueError:
            return f"server died of signal {-code}"
    return f"server exited with code {code}"


def tail(work, lines=8):
    try:
        with open(os.path.join(work, "server.log"), "rb") as log:
            return b"\n".join(log.read().splitlines()[-lines:]).decode("utf-8", "replace")
    except OSError:
        return ""


# ---------------------------------------------------------------------------------------
# Report

def fmt_ms(value):
    if value is None:
        return "-"
    if value == float("inf"):
        return "∞"
    if value >= 100:
        return f"{value:.0f} ms"
    return f"{value:.1f} ms"


def status_order(item):
    name = item[0]
    return (0, int(name), "") if name.isdigit() else (1, 0, name)


def format_counts(counts):
    if not counts:
        return "nothing"
    return " ".join(f"{name}×{value}" for name, value in sorted(counts.items(), key=status_order))


def victim_gets(victim):
    """The victim's GET p50 and p99: the issue's target is on its GETs (in `writer` it also POSTs, reported apart)."""
    if victim.get("get_p99") is not None:
        return victim.get("get_p50"), victim.get("get_p99")
    return victim.get("p50"), victim.get("p99")


def verdict(result):
    if result.get("skipped"):
        return "SKIP"
    victim = result.get("victim") or {}
    _, p99 = victim_gets(victim)
    rss_mib = result.get("peak_rss_kib", 0) / 1024
    ok = (p99 is not None and p99 <= TARGET_P99_MS and rss_mib <= TARGET_RSS_MIB
          and result.get("server") == "ok")
    return "PASS" if ok else "FAIL"


ROW = "{:<16} {:>11} {:>12} {:>13}   {:<46} {:>9}    {:<6} {}"


def format_row(result):
    victim = result.get("victim") or {}
    attackers = "-" if result.get("attackers") is None else format_counts(result["attackers"])
    errors = f"{victim.get('errors', 0)} of {victim.get('requests', 0)}"
    notes = list(result.get("notes", []))
    if result.get("server") not in (None, "ok"):
        notes.insert(0, result["server"])
    if result.get("skipped"):
        notes.insert(0, result["skipped"])
    p50, p99 = victim_gets(victim)
    return ROW.format(result["pattern"], fmt_ms(p50), fmt_ms(p99), errors,
                      attackers, f"{result.get('peak_rss_kib', 0) / 1024:.0f} MiB", verdict(result),
                      "; ".join(notes)).rstrip()


def report(args):
    results = [json.loads(line) for line in open(args.results) if line.strip()]
    lines = []
    version = next((r["version"] for r in results if r.get("version")), {})
    header = "catalog-server"
    if version.get("version"):
        header += f" {version['version']}"
    engine = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}.get(version.get("engine", ""), version.get("engine"))
    if engine:
        header += f" ({engine} {version.get('engine_version', '')})".replace(" )", ")")
    elif version.get("sqlite"):
        header += f" (SQLite {version['sqlite']})"
    header += f" — {args.server}"
    if args.context:
        header += f"; {args.context}"
    lines.append(header)
    lines.append(ROW.format("pattern", "victim p50", "victim p99", "victim errs", "attackers got",
                            "peak RSS", "target", "notes").rstrip())
    for result in results:
        lines.append(format_row(result))
    failed = [r["pattern"] for r in results if verdict(r) == "FAIL"]
    ran = len([r for r in results if verdict(r) != "SKIP"])
    skipped = f"; {len(results) - ran} skipped" if ran < len(results) else ""
    target = f"target: victim p99 ≤ {TARGET_P99_MS:.0f} ms and peak RSS ≤ {TARGET_RSS_MIB:.0f} MiB, server alive"
    if failed:
        lines.append(f"{target}: FAIL ({len(failed)} of {ran}: {', '.join(failed)}{skipped})")
    else:
        lines.append(f"{target}: PASS (all {ran} patterns{skipped})")
    for result in results:
        if result.get("log_tail"):
            lines.append(f"{result['pattern']}: last server log lines:")
            lines.extend("  " + line for line in result["log_tail"].splitlines())
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.output:
        with open(args.output, "w") as out:
            out.write(text)
    return 1 if failed and args.strict else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run")
    run.add_argument("--pattern", required=True, choices=PATTERNS)
    run.add_argument("--server", required=True)
    run.add_argument("--database", required=True)
    run.add_argument("--migrations", default="")
    run.add_argument("--port", type=int, required=True)
    run.add_argument("--workdir", required=True)
    run.add_argument("--cwd", default=None)
    run.add_argument("--ids", required=True)
    run.add_argument("--admin-key", required=True)
    run.add_argument("--duration", type=float, default=10.0)
    run.add_argument("--results", required=True)
    run.add_argument("--server-flags", default="")
    run.add_argument("--rss-cap-mib", type=int, default=2048)
    run.add_argument("--stop-timeout", type=float, default=15.0)
    run.add_argument("--attacker-nice", type=int, default=0)
    rep = commands.add_parser("report")
    rep.add_argument("--results", required=True)
    rep.add_argument("--server", default="catalog-server")
    rep.add_argument("--context", default="")
    rep.add_argument("--output", default="")
    rep.add_argument("--strict", action="store_true")
    victim = commands.add_parser("victim")
    victim.add_argument("config")
    attacker = commands.add_parser("attacker")
    attacker.add_argument("config")
    attacker.add_argument("index", type=int)
    args = parser.parse_args()
    if args.command == "run":
        run_pattern(args)
    elif args.command == "report":
        sys.exit(report(args))
    elif args.command == "victim":
        victim_main(args.config)
    else:
        attacker_main(args.config, args.index)


if __name__ == "__main__":
    main()
