"""Tests of scripts/lib/bench_report.py on a small fixture.

    python3 -m unittest discover -s scripts/lib/tests -v
"""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import bench_report  # noqa: E402

FIXTURE = os.path.join(HERE, "fixtures", "small.json")

try:
    import matplotlib  # noqa: F401
    HAVE_MATPLOTLIB = True
except ImportError:
    HAVE_MATPLOTLIB = False


class Figures(unittest.TestCase):
    def setUp(self):
        self.data = bench_report.load(FIXTURE)
        self.rows = {r["case"]["id"]: r for r in bench_report.summary(self.data)}

    def test_medians_per_system(self):
        self.assertEqual(self.rows["64"]["median"], {"weft": 12, "peer": 7})
        self.assertEqual(self.rows["64"]["range"]["peer"], (5, 8))

    def test_ratio_is_the_median_of_the_rounds_ratios_not_of_the_medians(self):
        r = self.rows["64"]["ratios"][("weft", "peer")]
        # rounds: 10/5, 12/8, 14/7 = 2.0, 1.5, 2.0 (the medians' ratio, 12/7, is not used)
        self.assertAlmostEqual(r["median"], 2.0)
        self.assertEqual(r["quartiles"], (1.75, 2.0))
        self.assertEqual(r["range"], (1.5, 2.0))
        self.assertEqual((r["rounds"], r["goal"], r["at_goal"]), (3, 1.8, 2))

    def test_rounds_pair_by_round_number_not_by_order(self):
        r = self.rows["1514"]["ratios"][("weft", "peer")]
        self.assertEqual(r["range"], (1.0, 3.0))

    def test_lower_is_better_ratio_is_inverted(self):
        self.assertAlmostEqual(self.rows["lat"]["ratios"][("weft", "peer")]["median"], 2.0)

    def test_baseline_gives_every_other_system_over_it(self):
        data = bench_report.load(FIXTURE)
        data["baseline"] = "peer"
        data["systems"] = ["weft", "peer", "other"]
        data["samples"].append({"round": 1, "case": "64", "system": "other", "value": 2.5,
                                "extra": {}})
        rows = {r["case"]["id"]: r for r in bench_report.summary(data)}
        self.assertEqual(set(rows["64"]["ratios"]), {("weft", "peer"), ("other", "peer")})
        self.assertAlmostEqual(rows["64"]["ratios"][("other", "peer")]["median"], 0.5)
        self.assertIn("| case | unit | weft | peer | other | weft / peer | other / peer |",
                      bench_report.report(data))

    def test_quartiles_of_one_value(self):
        self.assertEqual(bench_report.quartiles([3.0]), (3.0, 3.0))

    def test_show_max_gives_the_worst_round_beside_the_median(self):
        data = bench_report.load(FIXTURE)
        lat = next(c for c in data["cases"] if c["id"] == "lat")
        lat["show_max"] = True
        data["samples"].append({"round": 2, "case": "lat", "system": "peer", "value": 20,
                                "extra": {}})
        row = next(line for line in bench_report.report(data).splitlines()
                   if line.startswith(f"| {lat['label']} |"))
        self.assertIn("| 18.0 (max 20.0) |", row)


class Markdown(unittest.TestCase):
    def setUp(self):
        self.text = bench_report.report(bench_report.load(FIXTURE))

    def test_header_names_machine_commit_date_command(self):
        first = self.text.splitlines()[0]
        for want in ("2026-11-29 15:20 UTC", "abc1234", "AMD EPYC (family 25, model 1)", "2 CPUs"):
            self.assertIn(want, first)
        self.assertIn("`scripts/bench-example --runs 3` (3 rounds", self.text)

    def test_table_rows(self):
        self.assertIn("| case | unit | weft | peer | weft / peer |", self.text)
        self.assertIn("| 64 B | Mpps | 12.0 | 7.00 | **2.00** (1.75–2.00; 1.50–2.00); "
                      "goal ≥ 1.8: met, 2 of 3 rounds |", self.text)

    def test_absolute_goal_and_extras_and_notes(self):
        self.assertIn("Goal for latency: ≤ 10 µs: met (8.00).", self.text)
        self.assertIn("| 64 B | generator cycles / frame | 140 | 170 |", self.text)
        self.assertIn("A note.", self.text)

    def test_full_has_every_round_and_attachments(self):
        full = bench_report.report(bench_report.load(FIXTURE), full=True)
        self.assertIn("| 1514 B (Mpps) | 2 | 6.00 | 2.00 |", full)
        self.assertIn("rx 1\ntx 1", full)


class Building(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.file = os.path.join(self.dir, "r.json")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def run_tool(self, *args):
        bench_report.main(list(args))

    def test_build_step_by_step(self):
        self.run_tool("new", self.file, "--bench", "b", "--title", "T", "--command", 'b --x "y z"',
                      "--subject", "weft", "--systems", "weft peer", "--setting", "k=v")
        self.run_tool("case", self.file, "--id", "c", "--label", "C", "--unit", "Gbit/s")
        self.run_tool("case", self.file, "--id", "c", "--label", "again", "--unit", "x")
        self.run_tool("extra", self.file, "--id", "cpu", "--label", "CPUs busy")
        for rnd, (w, p) in enumerate([(2, 1), (3, 1)], 1):
            self.run_tool("sample", self.file, "--round", str(rnd), "--case", "c",
                          "--system", "weft", "--value", str(w), "--extra", "cpu=1.5")
            self.run_tool("sample", self.file, "--round", str(rnd), "--case", "c",
                          "--system", "peer", "--value", str(p))
        self.run_tool("finish", self.file)
        data = bench_report.load(self.file)
        self.assertEqual(data["command"], 'b --x "y z"')
        self.assertEqual(data["settings"], {"k": "v"})
        self.assertEqual(len(data["cases"]), 1)
        self.assertEqual(data["cases"][0]["label"], "C")
        self.assertEqual(len(data["samples"]), 4)
        self.assertIsNotNone(data["finished"])
        self.assertGreaterEqual(data["machine"]["cpus"], 1)
        self.assertIn("**2.50** (2.25–2.75; 2.00–3.00)", bench_report.report(data))

    def test_sample_of_an_unknown_case_or_system_is_refused(self):
        self.run_tool("new", self.file, "--bench", "b", "--title", "T", "--command", "b",
                      "--subject", "weft", "--systems", "weft")
        with self.assertRaises(SystemExit):
            self.run_tool("sample", self.file, "--round", "1", "--case", "nope",
                          "--system", "weft", "--value", "1")
        self.run_tool("case", self.file, "--id", "c", "--unit", "u")
        with self.assertRaises(SystemExit):
            self.run_tool("sample", self.file, "--round", "1", "--case", "c",
                          "--system", "other", "--value", "1")

    def test_not_a_results_file(self):
        with open(self.file, "w") as f:
            json.dump({"schema": "something else"}, f)
        with self.assertRaises(SystemExit):
            bench_report.load(self.file)


@unittest.skipUnless(HAVE_MATPLOTLIB, "matplotlib is missing (apt-get install python3-matplotlib)")
class Plot(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_writes_a_png(self):
        out = os.path.join(self.dir, "p.png")
        bench_report.plot(bench_report.load(FIXTURE), out)
        with open(out, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_update_doc_replaces_only_between_markers(self):
        doc = os.path.join(self.dir, "PAGE.md")
        with open(doc, "w") as f:
            f.write("# Page\n\nkept\n<!-- ex:begin -->\nold\n<!-- ex:end -->\nkept too\n")
        perf = os.path.join(self.dir, "perf")
        with contextlib.redirect_stderr(io.StringIO()):
            bench_report.main(["update-doc", FIXTURE, "--doc", doc, "--name", "ex",
                               "--perf-dir", perf])
        text = open(doc).read()
        self.assertTrue(text.startswith("# Page\n\nkept\n<!-- ex:begin -->\n"))
        self.assertTrue(text.endswith("<!-- ex:end -->\nkept too\n"))
        self.assertNotIn("old", text)
        self.assertNotIn("A note.", text)  # notes stay in the results file
        self.assertIn("![Example: weft against a peer](perf/ex.png)", text)
        self.assertIn("[`perf/ex.json`](perf/ex.json)", text)
        self.assertTrue(os.path.exists(os.path.join(perf, "ex.png")))
        self.assertEqual(json.load(open(os.path.join(perf, "ex.json")))["commit"], "abc1234")


class CommandLine(unittest.TestCase):
    def test_report_runs_as_a_script(self):
        tool = os.path.join(os.path.dirname(HERE), "bench_report.py")
        out = subprocess.run([sys.executable, tool, "report", FIXTURE], capture_output=True,
                             text=True, check=True).stdout
        self.assertIn("| 1514 B | Mpps |", out)


if __name__ == "__main__":
    unittest.main()
