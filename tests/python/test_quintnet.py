"""The quintnet Python module against the command line it mirrors (ctest: Python.Bindings).

Needs PYTHONPATH=<build>/python, QN_BIN_DIR=<build>/bin and QN_SOURCE_DIR (ctest sets them).
"""
import json
import os
import subprocess
import tempfile
import unittest
import warnings

import quintnet

BIN = os.environ.get("QN_BIN_DIR", "")
SOURCE = os.environ.get("QN_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
VIT_3D = os.path.join(SOURCE, "experiments", "configs", "vit_3d.yaml")
GPT2_3D = os.path.join(SOURCE, "experiments", "configs", "gpt2_brown_2x2x2.yaml")


def cli(*args):
    """Runs quintnet VERB ...; returns (exit code, stdout, stderr)."""
    done = subprocess.run([os.path.join(BIN, "quintnet"), *args], capture_output=True, text=True)
    return done.returncode, done.stdout, done.stderr


class Schedules(unittest.TestCase):
    def test_1f1b_bubble_is_the_closed_form(self):
        s = quintnet.schedule("1f1b", pp=4, microbatches=8)
        self.assertEqual(s.bubble_fraction, 3 / 11)
        self.assertEqual((s.name, s.pp, s.microbatches, s.chunks), ("1f1b", 4, 8, 1))

    def test_stats_and_actions_match_quintnet_schedule_json(self):
        s = quintnet.schedule("zb-h1", pp=4, microbatches=8)
        code, out, err = cli("schedule", "--schedule", "zb-h1", "--pp", "4", "--microbatches", "8",
                             "--costs", "1,1.5,0.5", "--json")
        self.assertEqual(code, 0, err)
        expected = json.loads(out)
        stats = s.stats(forward=1, backward_input=1.5, backward_weight=0.5)
        for key in ("step_time", "bubble_fraction", "bubble_fraction_per_rank", "peak_activations", "peak_pending_wgrad"):
            self.assertEqual(stats[key], expected[key], key)
        self.assertEqual(s.actions, expected["actions_per_rank"])

    def test_interleaved_defaults_to_two_chunks_and_draws(self):
        s = quintnet.schedule("interleaved", pp=2, microbatches=4)
        self.assertEqual(s.chunks, 2)
        self.assertIn("F", s.ascii())

    def test_a_bad_schedule_raises_the_clis_message(self):
        with self.assertRaises(quintnet.Error) as caught:
            quintnet.schedule("2f2b", pp=4, microbatches=8)
        code, _, err = cli("schedule", "--schedule", "2f2b")
        self.assertEqual(code, 2)
        self.assertIn(str(caught.exception), err)


class Plans(unittest.TestCase):
    def test_a_plan_from_a_file_and_from_a_dict_agree(self):
        plan = quintnet.load_plan(VIT_3D)
        self.assertEqual((plan.dp, plan.tp, plan.pp, plan.world_size), (2, 2, 2, 8))
        again = quintnet.load_plan(plan.to_dict())
        self.assertEqual(again.to_dict(), plan.to_dict())

    def test_a_malformed_plan_raises_the_clis_message(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "bad.yaml")
            with open(path, "w") as f:
                f.write("mesh_dim: [2, 2, 2]\nbatch_size: 30\ngrad_acc_steps: 4\n")
            with self.assertRaises(quintnet.Error) as caught:
                quintnet.load_plan(path)
            self.assertIsInstance(caught.exception, ValueError)
            code, _, err = cli("check-config", path)
            self.assertEqual(code, 2)
            self.assertIn(str(caught.exception), err)
            self.assertIn("batch_size", str(caught.exception))

    def test_unknown_keys_warn(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            quintnet.load_plan({"batch_sise": 32})
        self.assertTrue(any("batch_size" in str(w.message) for w in caught), [str(w.message) for w in caught])

    def test_a_plan_must_be_a_path_a_dict_or_a_plan(self):
        with self.assertRaises(quintnet.Error):
            quintnet.load_plan(42)


@unittest.skipUnless(quintnet.HAVE_SIMULATOR, "this build has no simulator (SimGrid)")
class Simulation(unittest.TestCase):
    def assert_same_summary(self, ours, theirs):
        self.assertEqual([k for k in ours if k != "wall_s"], [k for k in theirs if k != "wall_s"])
        for key, value in theirs.items():
            if key == "wall_s":
                continue
            if isinstance(value, dict):  # e.g. peak_memory_split
                self.assert_same_summary(ours[key], value)
            else:
                self.assertAlmostEqual(ours[key], value, delta=1e-12 * max(1.0, abs(value)), msg=key)

    def test_simulate_equals_the_clis_json(self):
        xml = os.path.join(SOURCE, "experiments", "sim", "platforms", "two_a100_nodes.xml")
        for plan, platform in ((VIT_3D, "dgx-a100"), (GPT2_3D, "dgx-a100"), (VIT_3D, xml)):
            code, out, err = cli("simulate", "--config", plan, "--platform", platform, "--json")
            self.assertEqual(code, 0, err)
            self.assert_same_summary(quintnet.simulate(plan, platform=platform), json.loads(out))
        # Every replica simulated (--exact / exact=True), and the default's reduced model agrees.
        code, out, err = cli("simulate", "--config", VIT_3D, "--platform", "dgx-a100", "--json", "--exact")
        self.assertEqual(code, 0, err)
        exact = quintnet.simulate(VIT_3D, platform="dgx-a100", exact=True)
        self.assert_same_summary(exact, json.loads(out))
        self.assertEqual(exact["replicas_simulated_once"], 1)
        reduced = quintnet.simulate(VIT_3D, platform="dgx-a100")
        self.assertEqual(reduced["replicas_simulated_once"], 2)
        self.assertAlmostEqual(reduced["step_time_s"], exact["step_time_s"], delta=1e-3 * exact["step_time_s"])

    def test_simulate_takes_a_loaded_plan_and_writes_its_trace(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "sim.json")
            summary = quintnet.simulate(quintnet.load_plan(VIT_3D), platform="cpu-local", trace=path)
            trace = quintnet.read_trace(path)
            self.assertEqual(trace.source, "sim")
            self.assertEqual(len(trace.ranks), 8)
            self.assertEqual(len(trace), summary["events"])

    def test_a_hundred_simulations_in_one_process(self):
        for m in range(1, 101):
            p, tf, tb = 4, 0.5, 1.25
            r = quintnet.simulate_uniform("1f1b", pp=p, microbatches=m, forward=tf, backward_input=tb)
            self.assertAlmostEqual(r["step_time_s"], (m + p - 1) * (tf + tb), delta=1e-9 * m)

    def test_a_plan_that_does_not_fit_raises_the_clis_message(self):
        code, _, err = cli("simulate", "--config", VIT_3D, "--model", "gpt3-175b", "--platform", "dgx-a100")
        self.assertEqual(code, 2)
        with self.assertRaises(quintnet.Error) as caught:
            quintnet.simulate(VIT_3D, model="gpt3-175b")
        self.assertIn(str(caught.exception), err)

    def test_plan_layouts_ranks_and_explains(self):
        layouts = quintnet.plan_layouts("gpt3-6.7b", gpus=64, global_batch=512, simulate=1)
        feasible = [c for c in layouts if c["rejected"] is None]
        self.assertTrue(feasible)
        self.assertIsNotNone(feasible[0]["simulated_step_s"])
        self.assertTrue(all(c["rejected"] for c in layouts[len(feasible):]))
        self.assertEqual(sorted(feasible, key=lambda c: c["analytic_step_s"]), feasible)


class Traces(unittest.TestCase):
    def test_a_schedule_trace_round_trips_through_a_file(self):
        trace = quintnet.schedule("1f1b", pp=4, microbatches=8).trace()
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "t.json")
            trace.write(path)
            again = quintnet.read_trace(path)
        self.assertEqual(again.events, trace.events)
        self.assertAlmostEqual(again.bubble_fraction(), 3 / 11, places=9)

    def test_a_trace_built_from_dicts_renders(self):
        events = [
            {"name": "F0", "kind": "forward", "rank": 0, "ts_us": 0, "dur_us": 10, "mb": 0},
            {"name": "F0", "kind": "forward", "rank": 1, "ts_us": 10, "dur_us": 10, "mb": 0},
            {"name": "B0", "kind": "backward", "rank": 1, "ts_us": 20, "dur_us": 20, "mb": 0},
            {"name": "B0", "kind": "backward", "rank": 0, "ts_us": 40, "dur_us": 20, "mb": 0},
        ]
        trace = quintnet.Trace("schedule", events)
        self.assertEqual(trace.ranks, [(0, 0, 0), (0, 0, 1)])
        columns = quintnet.trace_arrays(trace)
        self.assertEqual(list(columns["dur_us"]), [10, 10, 20, 20])
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "t.svg")
            trace.render_svg(path, title="two stages")
            with open(path) as f:
                svg = f.read()
        self.assertIn("<svg", svg)
        self.assertIn("two stages", svg)

    @unittest.skipUnless(quintnet.HAVE_PNG, "this build has no Qt viewer")
    def test_a_trace_renders_to_png(self):
        trace = quintnet.schedule("1f1b", pp=4, microbatches=8).trace()
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "t.png")
            trace.render_png(path, width=900)
            trace.render_png(path, width=1200, title="1f1b")  # a second picture in the same process
            with open(path, "rb") as f:
                png = f.read()
        self.assertTrue(png.startswith(b"\x89PNG\r\n\x1a\n"))
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        self.assertEqual(width, 1200)
        self.assertGreater(height, 100)

    def test_bad_events_and_files_raise_their_message(self):
        with self.assertRaises(quintnet.Error) as caught:
            quintnet.Trace("exec", [{"name": "F0", "kind": "forward", "rank": 0, "ts_us": 0}])
        self.assertIn("events[0]: no 'dur_us'", str(caught.exception))
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "broken.json")
            with open(path, "w") as f:
                f.write('{"traceEvents": [')
            with self.assertRaises(quintnet.Error) as caught:
                quintnet.read_trace(path)
            code, _, err = cli("bubble", path)
            self.assertEqual(code, 2)
            self.assertIn(str(caught.exception), err)


if __name__ == "__main__":
    unittest.main()
