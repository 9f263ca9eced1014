#!/usr/bin/env python3
"""One results format for every benchmark script (scripts/bench-*), and the one tool that reads it.

A benchmark builds its results file step by step while it runs, so that a run cut short
still leaves what it measured:

    bench_report.py new FILE --bench NAME --title TEXT --command CMD --subject weft \\
        --systems "weft testpmd ovs" [--setting KEY=VALUE]... [--x-label TEXT]
    bench_report.py case FILE --id 64 --label "64 B" --unit Mpps [--lower-is-better]
        [--no-plot] [--show-max] [--goal PEER=RATIO]... [--goal-value V]
    bench_report.py extra FILE --id gen_cycles --label "generator cycles / frame"
    bench_report.py sample FILE --round 1 --case 64 --system weft --value 13.2 [--extra K=V]...
    bench_report.py note FILE TEXT
    bench_report.py attach FILE NAME TEXT_FILE
    bench_report.py finish FILE

and reads it with

    bench_report.py report FILE [--plot PNG] [--full]
    bench_report.py update-doc FILE --doc docs/PERFORMANCE.md --name NAME --perf-dir docs/perf

`report` prints a markdown table: per case the median over the rounds of each system's
rate, and for each peer the median of the rounds' subject / peer ratios (a round measures
every system once, seconds apart), with their quartiles and range (with --baseline SYSTEM
at `new`: every other system / that one instead); then the medians of
any extra per-sample figures (e.g. what the traffic generator cost). `--plot` writes one
PNG (matplotlib): for each unit among the plotted cases a panel of bars, the median per
system, whiskers from the lowest to the highest round. `update-doc` copies the results
file to PERF_DIR/NAME.json, writes PERF_DIR/NAME.png and replaces the lines between
`<!-- NAME:begin -->` and `<!-- NAME:end -->` in DOC with the table and the plot.

The results file (JSON, "schema": "weft-bench-results/1"):
    bench, title, command, commit, commit_dirty, started, finished (UTC, ISO 8601),
    machine {cpu_model, cpu_family, cpu_model_number, cpus, threads_per_core, hypervisor,
             kernel, load_before, load_after},
    settings {KEY: VALUE}, subject, baseline, systems [..], x_label,
    cases [{id, label, unit, better: "higher"|"lower", plot, show_max, goals {"A/B": RATIO},
            goal_value}],
    extras [{id, label, unit}],
    samples [{round, case, system, value, extra {ID: number}}],
    notes [..], attachments {NAME: TEXT}
Needs python3; --plot and update-doc need matplotlib (Debian: python3-matplotlib).
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys

SCHEMA = "weft-bench-results/1"


# --- reading and writing the results file ----------------------------------------------------

def load(path):
    with open(path) as f:
        data = json.load(f)
    if data.get("schema") != SCHEMA:
        raise SystemExit(f"{path}: not a {SCHEMA} file (schema: {data.get('schema')!r})")
    return data


def save(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return None


def machine():
    """What `lscpu` says about the CPU, the kernel, and the load now."""
    info = {}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            key, _, value = line.partition(":")
            info[key.strip()] = value.strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    as_int = lambda v: int(v) if v and v.isdigit() else None
    return {
        "cpu_model": info.get("Model name") or platform.processor() or "unknown",
        "cpu_family": info.get("CPU family"),
        "cpu_model_number": info.get("Model"),
        "cpus": as_int(info.get("CPU(s)")) or os.cpu_count(),
        "threads_per_core": as_int(info.get("Thread(s) per core")),
        "hypervisor": info.get("Hypervisor vendor"),
        "kernel": platform.release(),
        "load_before": loadavg(),
        "load_after": None,
    }


def git_commit():
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return rev, bool(dirty)
    except (OSError, subprocess.CalledProcessError):
        return "unknown", False


def key_value(text):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"want KEY=VALUE, got {text!r}")
    return key, value


def number(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}")


def cmd_new(a):
    rev, dirty = git_commit()
    data = {
        "schema": SCHEMA, "bench": a.bench, "title": a.title, "command": a.command,
        "commit": rev, "commit_dirty": dirty, "started": now_utc(), "finished": None,
        "machine": machine(), "settings": dict(a.setting), "subject": a.subject,
        "baseline": a.baseline, "systems": a.systems.split(), "x_label": a.x_label, "cases": [], "extras": [],
        "samples": [], "notes": [], "attachments": {},
    }
    for who in (a.subject, a.baseline):
        if who is not None and who not in data["systems"]:
            raise SystemExit(f"{who} is not one of --systems")
    save(a.file, data)


def cmd_case(a):
    data = load(a.file)
    if any(c["id"] == a.id for c in data["cases"]):
        return  # declared already (a bench may declare its cases once per round)
    goals = {}
    for pair, ratio in a.goal:
        goals[pair if "/" in pair else f"{data['subject']}/{pair}"] = float(ratio)
    data["cases"].append({"id": a.id, "label": a.label or a.id, "unit": a.unit,
                          "better": "lower" if a.lower_is_better else "higher",
                          "plot": not a.no_plot, "show_max": a.show_max, "goals": goals,
                          "goal_value": a.goal_value})
    save(a.file, data)


def cmd_extra(a):
    data = load(a.file)
    if not any(e["id"] == a.id for e in data["extras"]):
        data["extras"].append({"id": a.id, "label": a.label or a.id, "unit": a.unit})
        save(a.file, data)


def cmd_sample(a):
    data = load(a.file)
    if a.system not in data["systems"]:
        raise SystemExit(f"system {a.system!r} is not one of {data['systems']}")
    if not any(c["id"] == a.case for c in data["cases"]):
        raise SystemExit(f"case {a.case!r} was not declared (bench_report.py case)")
    data["samples"].append({"round": a.round, "case": a.case, "system": a.system,
                            "value": a.value,
                            "extra": {k: float(v) for k, v in a.extra}})
    save(a.file, data)


def cmd_note(a):
    data = load(a.file)
    data["notes"].append(a.text)
    save(a.file, data)


def cmd_attach(a):
    data = load(a.file)
    with open(a.text_file, errors="replace") as f:
        data["attachments"][a.name] = f.read().rstrip()
    save(a.file, data)


def cmd_finish(a):
    data = load(a.file)
    data["finished"] = now_utc()
    data["machine"]["load_after"] = loadavg()
    save(a.file, data)


# --- the figures -------------------------------------------------------------------------------

def quartiles(values):
    """First and third quartiles (inclusive method); the value itself when alone."""
    v = sorted(values)
    if len(v) == 1:
        return v[0], v[0]
    q = statistics.quantiles(v, n=4, method="inclusive")
    return q[0], q[2]


def series(data, case_id, system):
    """The system's values in a case, by round (a dict round -> value)."""
    return {s["round"]: s["value"] for s in data["samples"]
            if s["case"] == case_id and s["system"] == system}


def pairs(data):
    """The ratios a report gives: (subject, peer) for every peer, or (system, baseline) for
    every other system when the results name a baseline."""
    base = data.get("baseline")
    if base:
        return [(s, base) for s in data["systems"] if s != base]
    return [(data["subject"], s) for s in data["systems"] if s != data["subject"]]


def round_ratios(data, case, mine_system, peer):
    """The mine / peer ratio of every round that measured both (peer / mine when lower
    is better, so that a ratio above 1 always means the first is ahead)."""
    mine, theirs = series(data, case["id"], mine_system), series(data, case["id"], peer)
    out = []
    for rnd in sorted(set(mine) & set(theirs)):
        a, b = mine[rnd], theirs[rnd]
        if case["better"] == "lower":
            a, b = b, a
        if b > 0:
            out.append(a / b)
    return out


def summary(data):
    """Per case: medians per system, and per peer the ratio figures."""
    rows = []
    for case in data["cases"]:
        med, spread, n = {}, {}, {}
        for system in data["systems"]:
            v = list(series(data, case["id"], system).values())
            if v:
                med[system] = statistics.median(v)
                spread[system] = (min(v), max(v))
                n[system] = len(v)
        ratios = {}
        for a, b in pairs(data):
            r = round_ratios(data, case, a, b)
            if r:
                goal = case["goals"].get(f"{a}/{b}")
                ratios[(a, b)] = {
                    "median": statistics.median(r), "quartiles": quartiles(r),
                    "range": (min(r), max(r)), "rounds": len(r), "goal": goal,
                    "at_goal": sum(x >= goal for x in r) if goal is not None else None,
                }
        rows.append({"case": case, "median": med, "range": spread, "n": n, "ratios": ratios})
    return rows


def compared_rounds(data, case_ids=None):
    """The rounds of the cases measured by more than one system (of every case when none is),
    so that a case of the subject alone (e.g. idle windows) does not count as rounds."""
    ids = case_ids or [c["id"] for c in data["cases"]]
    by_case = {}
    for s in data["samples"]:
        if s["case"] in ids:
            by_case.setdefault(s["case"], set()).add(s["system"])
    shared = {c for c, systems in by_case.items() if len(systems) > 1} or set(by_case)
    return sorted({s["round"] for s in data["samples"] if s["case"] in shared})


def fmt(x):
    """Three significant figures, without an exponent."""
    if x == 0:
        return "0"
    a = abs(x)
    if a >= 1000:
        return f"{x:,.0f}".replace(",", " ")
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def describe_machine(data):
    m = data["machine"]
    cpu = m.get("cpu_model") or "unknown CPU"
    if m.get("cpu_family"):
        cpu += f" (family {m['cpu_family']}, model {m.get('cpu_model_number')})"
    parts = [cpu, f"{m.get('cpus')} CPUs"]
    if m.get("threads_per_core"):
        parts[-1] += f" ({m['threads_per_core']} thread per core)" if m["threads_per_core"] == 1 \
            else f" ({m['threads_per_core']} threads per core)"
    if m.get("hypervisor"):
        parts.append(f"{m['hypervisor']} guest")
    parts.append(f"kernel {m.get('kernel')}")
    return ", ".join(parts)


def when(data):
    started = data.get("started") or ""
    return started[:16].replace("T", " ") + " UTC" if started else "unknown date"


def report(data, full=False, notes=True):
    rows = summary(data)
    subject = data["subject"]
    peers = pairs(data)
    rounds = compared_rounds(data)
    m = data["machine"]
    load = lambda v: " ".join(f"{x:.2f}" for x in v) if v else "?"
    commit = data["commit"] + (" (with uncommitted changes)" if data.get("commit_dirty") else "")
    lines = [
        f"{when(data)}, commit {commit}; {describe_machine(data)}; load average "
        f"{load(m.get('load_before'))} before, {load(m.get('load_after'))} after.",
        "",
        f"Command: `{data['command']}` ({len(rounds)} round{'s' if len(rounds) != 1 else ''}"
        + (", each measuring every system once, alternating" if peers else "") + ")."
    ]
    if data.get("settings"):
        lines += ["", "Settings: " + ", ".join(f"{k} = {v}" for k, v in data["settings"].items()) + "."]
    lines += [""]
    head = ["case", "unit"] + data["systems"] + [f"{a} / {b}" for a, b in peers]
    lines += ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for row in rows:
        case = row["case"]
        cells = [case["label"], case["unit"] + (" (lower is better)" if case["better"] == "lower" else "")]
        for system in data["systems"]:
            if system in row["median"]:
                lo, hi = row["range"][system]
                cell = fmt(row["median"][system])
                if not peers and row["n"][system] > 1:
                    cell += f" ({fmt(lo)}–{fmt(hi)})"
                elif case.get("show_max") and row["n"][system] > 1:
                    # Where the worst round matters (a gap, a loss): the median, then the worst.
                    cell += (f" (max {fmt(hi)})" if case["better"] == "lower" else f" (min {fmt(lo)})")
                cells.append(cell)
            else:
                cells.append("–")
        for pair in peers:
            r = row["ratios"].get(pair)
            if not r:
                cells.append("–")
                continue
            q1, q3 = r["quartiles"]
            lo, hi = r["range"]
            cell = f"**{r['median']:.2f}**"
            if r["rounds"] > 1:
                cell += f" ({q1:.2f}–{q3:.2f}; {lo:.2f}–{hi:.2f})"
            if r["goal"] is not None:
                met = "met" if r["median"] >= r["goal"] else "not met"
                cell += f"; goal ≥ {r['goal']:g}: {met}, {r['at_goal']} of {r['rounds']} rounds"
            cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
    lines += [""]
    if peers:
        lines.append("Rates: the median over the rounds. Ratios: the median of the rounds' "
                     "ratios (each round measures every system once, seconds apart), then "
                     "its quartiles and its range over the rounds; above 1 means the first "
                     "named is ahead.")
    else:
        lines.append("The median over the runs, and the lowest and highest run.")
    goals = [(row, row["case"]["goal_value"]) for row in rows
             if row["case"].get("goal_value") is not None and subject in row["median"]]
    for row, goal in goals:
        v, case = row["median"][subject], row["case"]
        ok = v <= goal if case["better"] == "lower" else v >= goal
        sign = "≤" if case["better"] == "lower" else "≥"
        lines.append(f"Goal for {case['label']}: {sign} {goal:g} {case['unit']}: "
                     f"{'met' if ok else 'not met'} ({fmt(v)}).")
    if data["extras"]:
        lines += ["", "| case | " + " | ".join(["figure"] + data["systems"]) + " |",
                  "|---|---|" + "---:|" * len(data["systems"])]
        for case in data["cases"]:
            for extra in data["extras"]:
                cells = []
                for system in data["systems"]:
                    v = [s["extra"][extra["id"]] for s in data["samples"]
                         if s["case"] == case["id"] and s["system"] == system
                         and extra["id"] in s["extra"]]
                    cells.append(fmt(statistics.median(v)) if v else "–")
                if any(c != "–" for c in cells):
                    label = extra["label"] + (f" ({extra['unit']})" if extra.get("unit") else "")
                    lines.append(f"| {case['label']} | {label} | " + " | ".join(cells) + " |")
        lines += ["", "Extra figures: the median over the rounds."]
    for note in data.get("notes", []) if notes else []:
        lines += ["", note]
    if full:
        lines += ["", "Every round:", "",
                  "| case | round | " + " | ".join(data["systems"]) + " |",
                  "|---|---:|" + "---:|" * len(data["systems"])]
        for case in data["cases"]:
            per = {s: series(data, case["id"], s) for s in data["systems"]}
            for rnd in rounds:
                cells = [fmt(per[s][rnd]) if rnd in per[s] else "–" for s in data["systems"]]
                lines.append(f"| {case['label']} ({case['unit']}) | {rnd} | " + " | ".join(cells) + " |")
        for name, text in data.get("attachments", {}).items():
            lines += ["", f"{name}:", "", "```text", text, "```"]
    return "\n".join(lines) + "\n"


# --- the plot ----------------------------------------------------------------------------------

def plot(data, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("matplotlib is missing: apt-get install python3-matplotlib "
                         "(scripts/install-test-deps installs it)")
    cases = [c for c in data["cases"] if c["plot"]]
    if not cases:
        raise SystemExit("no case to plot")
    units = []
    for c in cases:
        if c["unit"] not in units:
            units.append(c["unit"])
    systems = data["systems"]
    horizontal = len(systems) == 1 and len(cases) > 6
    if horizontal:
        fig, axes = plt.subplots(1, len(units), figsize=(9, 0.45 * len(cases) + 1.5), squeeze=False)
    else:
        fig, axes = plt.subplots(1, len(units), figsize=(max(7, 4.5 * len(units) + 1.5), 4.5),
                                 squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, unit in zip(axes[0], units):
        group = [c for c in cases if c["unit"] == unit]
        # Slots only for the systems measured in this panel.
        present = [sy for sy in systems if any(series(data, c["id"], sy) for c in group)]
        width = 0.8 / len(present)
        for system in present:
            i = present.index(system)
            pos, height, err_lo, err_hi = [], [], [], []
            for j, case in enumerate(group):
                v = list(series(data, case["id"], system).values())
                if not v:
                    continue
                med = statistics.median(v)
                pos.append(j + (i - (len(present) - 1) / 2) * width)
                height.append(med)
                err_lo.append(med - min(v))
                err_hi.append(max(v) - med)
            if not pos:
                continue
            if horizontal:
                ax.barh(pos, height, height=width, xerr=[err_lo, err_hi], capsize=3,
                        label=system, color=colours[systems.index(system) % len(colours)])
            else:
                ax.bar(pos, height, width=width, yerr=[err_lo, err_hi], capsize=3,
                       label=system, color=colours[systems.index(system) % len(colours)])
        # A panel whose medians span more than 20x gets a log scale, so the small bars show.
        medians = [statistics.median(v) for c in group for sy in systems
                   for v in [list(series(data, c["id"], sy).values())] if v]
        log = bool(medians) and min(medians) > 0 and max(medians) / min(medians) > 20
        if log:
            (ax.set_xscale if horizontal else ax.set_yscale)("log")
        labels = [c["label"] for c in group]
        better = "lower is better" if group[0]["better"] == "lower" else "higher is better"
        if log:
            better += ", log scale"
        if horizontal:
            ax.set_yticks(range(len(group)))
            ax.set_yticklabels(labels, fontsize=8)
            ax.invert_yaxis()
            ax.set_xlabel(f"{unit} ({better})")
            ax.grid(axis="x", alpha=0.3)
        else:
            ax.set_xticks(range(len(group)))
            ax.set_xticklabels(labels, fontsize=8)
            ax.set_ylabel(f"{unit} ({better})")
            if data.get("x_label"):
                ax.set_xlabel(data["x_label"])
            ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    rounds = len(compared_rounds(data, [c["id"] for c in cases]))
    fig.suptitle(f"{data['title']}\n{when(data)}, commit {data['commit']}, "
                 f"{data['machine'].get('cpus')} CPUs {data['machine'].get('cpu_model')}\n"
                 f"bars: median of {rounds} round{'s' if rounds != 1 else ''}; "
                 "whiskers: lowest to highest round",
                 fontsize=9)
    if len(systems) > 1:
        handles, names = [], []
        for ax in axes[0]:
            for handle, name in zip(*ax.get_legend_handles_labels()):
                if name not in names:
                    handles.append(handle)
                    names.append(name)
        order = sorted(range(len(names)), key=lambda k: systems.index(names[k]))
        handles, names = [handles[k] for k in order], [names[k] for k in order]
        fig.legend(handles, names, loc="lower center", ncol=len(systems), fontsize=8, frameon=False)
        fig.tight_layout(rect=(0, 0.05, 1, 1))
    else:
        fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# --- the performance page -----------------------------------------------------------------------

def cmd_report(a):
    data = load(a.file)
    sys.stdout.write(report(data, full=a.full))
    if a.plot:
        plot(data, a.plot)
        print(f"\nPlot: {a.plot}")


def cmd_update_doc(a):
    data = load(a.file)
    os.makedirs(a.perf_dir, exist_ok=True)
    json_path = os.path.join(a.perf_dir, a.name + ".json")
    png_path = os.path.join(a.perf_dir, a.name + ".png")
    if os.path.abspath(a.file) != os.path.abspath(json_path):
        shutil.copyfile(a.file, json_path)
    plot(data, png_path)
    begin, end = f"<!-- {a.name}:begin -->", f"<!-- {a.name}:end -->"
    with open(a.doc) as f:
        doc = f.read()
    if begin not in doc or end not in doc:
        raise SystemExit(f"{a.doc} has no {begin} ... {end} lines")
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    rel = lambda p: os.path.relpath(p, os.path.dirname(os.path.abspath(a.doc)) or ".")
    # The page explains the systems in its own words: the run's notes stay in the file.
    body = (report(data, notes=False).rstrip() + "\n\n"
            + f"![{data['title']}]({rel(os.path.abspath(png_path))})\n\n"
            + f"Results file: [`{rel(os.path.abspath(json_path))}`]({rel(os.path.abspath(json_path))}).")
    with open(a.doc, "w") as f:
        f.write(f"{head}{begin}\n{body}\n{end}{tail}")
    print(f"== {a.doc}: {a.name} updated; {json_path}, {png_path}", file=sys.stderr)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("new", help="start a results file")
    s.add_argument("file")
    s.add_argument("--bench", required=True)
    s.add_argument("--title", required=True)
    s.add_argument("--command", required=True)
    s.add_argument("--subject", required=True)
    s.add_argument("--baseline", help="report every other system / this one")
    s.add_argument("--systems", required=True, help="space-separated, the subject among them")
    s.add_argument("--setting", type=key_value, action="append", default=[])
    s.add_argument("--x-label", default="")
    s.set_defaults(func=cmd_new)

    s = sub.add_parser("case", help="declare a case (once; later calls are no-ops)")
    s.add_argument("file")
    s.add_argument("--id", required=True)
    s.add_argument("--label")
    s.add_argument("--unit", required=True)
    s.add_argument("--lower-is-better", action="store_true")
    s.add_argument("--no-plot", action="store_true")
    s.add_argument("--show-max", action="store_true",
                   help="give the worst round beside the median in the table")
    s.add_argument("--goal", type=key_value, action="append", default=[],
                   help="PEER=RATIO (the subject's goal against PEER) or A/B=RATIO")
    s.add_argument("--goal-value", type=number)
    s.set_defaults(func=cmd_case)

    s = sub.add_parser("extra", help="declare an extra per-sample figure")
    s.add_argument("file")
    s.add_argument("--id", required=True)
    s.add_argument("--label")
    s.add_argument("--unit", default="")
    s.set_defaults(func=cmd_extra)

    s = sub.add_parser("sample", help="add one measurement")
    s.add_argument("file")
    s.add_argument("--round", type=int, required=True)
    s.add_argument("--case", required=True)
    s.add_argument("--system", required=True)
    s.add_argument("--value", type=number, required=True)
    s.add_argument("--extra", type=key_value, action="append", default=[])
    s.set_defaults(func=cmd_sample)

    s = sub.add_parser("note", help="add a sentence printed under the table")
    s.add_argument("file")
    s.add_argument("text")
    s.set_defaults(func=cmd_note)

    s = sub.add_parser("attach", help="keep a text file (e.g. counters) in the results")
    s.add_argument("file")
    s.add_argument("name")
    s.add_argument("text_file")
    s.set_defaults(func=cmd_attach)

    s = sub.add_parser("finish", help="record the end time and load")
    s.add_argument("file")
    s.set_defaults(func=cmd_finish)

    s = sub.add_parser("report", help="print the markdown table (and write the plot)")
    s.add_argument("file")
    s.add_argument("--plot", metavar="PNG")
    s.add_argument("--full", action="store_true", help="also every round and the attachments")
    s.set_defaults(func=cmd_report)

    s = sub.add_parser("update-doc", help="put the table and plot into a page between markers")
    s.add_argument("file")
    s.add_argument("--doc", required=True)
    s.add_argument("--name", required=True)
    s.add_argument("--perf-dir", required=True)
    s.set_defaults(func=cmd_update_doc)

    a = p.parse_args(argv)
    a.func(a)


if __name__ == "__main__":
    main()
