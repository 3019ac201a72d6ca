"""``python -m engine`` as a script drives it, through the real CLI process and real runs of the demo model: --set
and --init-from instead of a copied YAML, exit codes that say how a run ended, Ctrl-C named as Ctrl-C, a --help
without internal commands, presets that continue another run, each method's own metrics in its progress lines
(train.log's own), and refusals (not tracebacks) for folders that cannot hold a run or an export."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from engine import runs
from engine.store.paths import PROJECT_ROOT
from engine.store.processes import engine_command, engine_env
from engine.store.rundir import iter_metrics
from tests.helpers.engine_cli import ctrl_c_as_in_a_terminal
from tests.helpers.run_progress import wait_for_step

pytestmark = pytest.mark.integration

PRESETS = PROJECT_ROOT / "assets" / "presets"
# A few quick steps of the demo task: 64 rows, batches of 4, no evaluation, one thread (a busy machine's share
# would not change the run).
QUICK = [
    "--set",
    "data.max_samples=64",
    "--set",
    "train.per_device_batch_size=4",
    "--set",
    "train.eval_strategy=no",
    "--set",
    "train.logging_steps=1",
    "--set",
    "launch.threads_per_process=1",
]


def engine(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python -m engine *args`` from the project root, offline, as a user runs it."""
    return subprocess.run(
        engine_command(*args),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=PROJECT_ROOT,
        env=engine_env({"HF_HUB_OFFLINE": "1"}),
    )


def refused(result: subprocess.CompletedProcess[str], message: str) -> None:
    """The command exited 2 with ``message`` on stderr and no traceback."""
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stdout + result.stderr


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo preset trained for 4 steps, set on the command line: a run to continue from and to export."""
    run_dir = tmp_path_factory.mktemp("cli") / "workspace" / "runs" / "sft"
    result = engine(
        "train", str(PRESETS / "demo.yaml"), "--run-dir", str(run_dir), *QUICK, "--set", "train.max_steps=4"
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return run_dir


# --- --set ---------------------------------------------------------------------------------------------------


def test_set_changes_the_run_and_is_saved_with_it(sft_run: Path):
    saved = yaml.safe_load((sft_run / "config.yaml").read_text())
    assert saved["train"]["max_steps"] == 4 and saved["data"]["max_samples"] == 64
    assert saved["train"]["eval_strategy"] == "no" and saved["launch"]["threads_per_process"] == 1
    assert saved["name"] == yaml.safe_load((PRESETS / "demo.yaml").read_text())["name"]  # the rest is the file's
    current = runs.status(sft_run)
    assert (current.state, current.step) == ("completed", 4)
    assert [event["step"] for event in iter_metrics(sft_run) if event["event"] == "train"] == [1, 2, 3, 4]


def test_check_takes_set_typed_by_the_schema_and_names_a_bad_key():
    config = str(PRESETS / "demo.yaml")
    good = engine("check", config, "--set", "train.max_steps=7", "--set", "train.padding_free=on")
    assert good.returncode == 0, good.stderr
    assert "optimizer steps: 7" in good.stdout and "ready to train" in good.stdout
    refused(
        engine("check", config, "--set", "train.max_stpes=7"), "train.max_stpes: unknown key (did you mean max_steps?)"
    )
    refused(engine("check", config, "--set", "train.max_steps=true"), "train.max_steps: must be a whole number")
    refused(engine("check", config, "--set", "train.max_steps=[1"), "train.max_steps: --set value '[1' is not YAML")
    refused(engine("check", config, "--set", "train.max_steps"), "--set 'train.max_steps': write KEY=VALUE")
    refused(engine("check", config, "--set", "adapter.r.x=1"), "adapter.r: holds 16, not a section")


def test_sweep_takes_set_for_its_own_fields_and_its_base(tmp_path: Path):
    sweep = PRESETS / "sweeps" / "demo-sweep.yaml"
    workspace = str(tmp_path / "ws")
    refused(
        engine("sweep", str(sweep), "--workspace", workspace, "--set", "trials=true"), "trials: must be a whole number"
    )
    refused(
        engine("sweep", str(sweep), "--workspace", workspace, "--set", "base.train.max_stpes=2"),
        "base.train.max_stpes: unknown key (did you mean max_steps?)",
    )
    assert not (tmp_path / "ws").exists()  # refused before anything was made

    sets = ["trials=1", "base.train.max_steps=4", "base.train.eval_steps=4", "base.data.max_samples=64"]
    sets += ["base.launch.threads_per_process=1", 'space."train.learning_rate".high=0.002']
    result = engine("sweep", str(sweep), "--workspace", workspace, *(part for item in sets for part in ("--set", item)))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    kept = yaml.safe_load((tmp_path / "ws" / "sweeps" / "demo-sweep" / "sweep.yaml").read_text())
    assert kept["trials"] == 1 and kept["base"]["train"]["max_steps"] == 4  # the sweep as run, base inline
    assert kept["space"]["train.learning_rate"]["high"] == 0.002
    (trial,) = (tmp_path / "ws" / "runs").iterdir()
    config = yaml.safe_load((trial / "config.yaml").read_text())
    assert config["train"]["max_steps"] == 4 and 1e-3 <= config["train"]["learning_rate"] <= 2e-3
    assert runs.status(trial).state == "completed"


# --- exit codes, Ctrl-C, resume --set --------------------------------------------------------------------------


def test_ctrl_c_stops_with_its_own_exit_code_and_resume_set_trains_on(tmp_path: Path):
    run_dir = tmp_path / "run"
    command = engine_command("train", str(PRESETS / "demo.yaml"), "--run-dir", str(run_dir), *QUICK)
    command += ["--set", "train.max_steps=400", "--set", "train.save_steps=1000"]
    train = subprocess.Popen(
        command, cwd=PROJECT_ROOT, env=engine_env({"HF_HUB_OFFLINE": "1"}), stdout=subprocess.PIPE, text=True
    )
    wait_for_step(run_dir, 2, timeout=300)
    train.send_signal(signal.SIGINT)  # Ctrl-C
    output = train.communicate(timeout=300)[0]
    stopped = runs.status(run_dir)
    assert stopped.state == "stopped" and stopped.checkpoints == [stopped.step], output
    assert train.returncode == 3, output  # not 0: the run did not complete
    assert "Ctrl-C (SIGINT): stopping the run after this step" in output
    assert f"SIGINT: saving a checkpoint at step {stopped.step} and stopping" in output and "SIGTERM" not in output

    before = (run_dir / "config.yaml").read_text()
    refused(
        engine("resume", str(run_dir), "--set", "model.name_or_path=other"),
        "model.name_or_path: cannot change on resume",
    )
    assert (run_dir / "config.yaml").read_text() == before and runs.status(run_dir).state == "stopped"
    # A length the checkpoint has trained already ("N more steps" meant): refused, or the run would complete at
    # once and never resume again. With max_steps -1, the epochs.
    refused(
        engine("resume", str(run_dir), "--set", f"train.max_steps={stopped.step}"),
        f"train.max_steps: {stopped.step} steps end by the checkpoint's step {stopped.step}",
    )
    refused(
        engine("resume", str(run_dir), "--set", "train.max_steps=-1", "--set", "train.num_epochs=0.001"),
        "train.num_epochs: 0.001 epochs end by the checkpoint's epoch",
    )
    assert (run_dir / "config.yaml").read_text() == before and runs.status(run_dir).state == "stopped"

    target = stopped.step + 2
    resumed = engine("resume", str(run_dir), "--set", f"train.max_steps={target}")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["train"]["max_steps"] == target
    assert (runs.status(run_dir).state, runs.status(run_dir).step) == ("completed", target)
    assert f"train step {target}/{target}" in resumed.stdout


def test_detach_starts_the_run_and_wait_says_later_how_it_ended(tmp_path: Path):
    """``train --detach`` returns once the run is started, with the run directory alone on stdout; ``wait`` gives
    train's exit code when the run has ended (3 stopped, 0 completed), and Ctrl-C ends the waiting, not the run."""
    workspace, name = tmp_path / "ws", yaml.safe_load((PRESETS / "demo.yaml").read_text())["name"]
    command = ["train", str(PRESETS / "demo.yaml"), "--workspace", str(workspace), *QUICK, "--detach"]
    started = engine(*command, "--set", "train.max_steps=400", "--set", "train.save_steps=1000")
    assert started.returncode == 0, started.stdout[-3000:] + started.stderr[-3000:]
    run_dir = Path(started.stdout.strip())
    assert started.stdout == f"{run_dir}\n" and run_dir.parent == (workspace / "runs").resolve()
    assert "optimizer steps: 400" in started.stderr
    wait_for_step(run_dir, 2, timeout=300)  # it trains on after the command has returned

    waiting = subprocess.Popen(
        engine_command("wait", run_dir.name, "--workspace", str(workspace)),
        cwd=PROJECT_ROOT,
        env=engine_env({"HF_HUB_OFFLINE": "1"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_as_in_a_terminal,
    )
    assert f"waiting for {run_dir.name} (running, step " in (waiting.stderr.readline() if waiting.stderr else "")
    waiting.send_signal(signal.SIGINT)  # Ctrl-C
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 130 and f"stopped waiting; {run_dir.name} goes on" in err, out + err
    assert runs.status(run_dir).state == "running"

    assert engine("stop", str(run_dir)).returncode == 0
    stopped = engine("wait", str(run_dir))
    step = runs.status(run_dir).step
    assert (stopped.returncode, stopped.stdout) == (3, f"{name}: stopped, step {step}/400\n"), stopped.stderr

    resumed = engine("resume", str(run_dir), "--set", f"train.max_steps={step + 2}", "--detach")
    assert (resumed.returncode, resumed.stdout) == (0, f"{run_dir}\n"), resumed.stderr
    assert f"resuming {run_dir} from checkpoint {step}" in resumed.stderr
    completed = engine("wait", str(run_dir))
    assert (completed.returncode, completed.stdout) == (0, f"{name}: completed, step {step + 2}/{step + 2}\n")


def test_help_lists_only_public_commands_each_argument_explained_and_the_exit_codes():
    top = engine("--help")
    assert top.returncode == 0
    assert "SUPPRESS" not in top.stdout
    for internal in ("supervise", "worker", "standby", "fork-server", "chat-worker"):
        assert internal not in top.stdout
    assert "3 stopped with a checkpoint" in " ".join(top.stdout.split())
    for command in ("train", "resume", "check", "evaluate", "export", "sweep", "sweep-status", "sweep-stop", "wait"):
        shown = engine(command, "--help").stdout
        section = shown.split("positional arguments:\n", 1)[1].split("\n\n", 1)[0]
        names = re.findall(r"^  (\S+)(.*)$", section, re.MULTILINE)
        assert names and all(text.strip() for _, text in names), (command, section)


# --- presets that continue a run; the method's metrics in its lines ---------------------------------------------


def test_a_preset_that_continues_a_run_says_so_and_offers_the_chain(sft_run: Path):
    bare = engine("check", str(PRESETS / "demo-dpo.yaml"), "--set", "train.max_steps=2")
    assert bare.returncode == 0, bare.stderr
    assert "demo-dpo.yaml is meant to continue a run of assets/presets/demo.yaml" in bare.stdout
    assert "this run starts from the bare base model assets/demo-model" in bare.stdout
    start = "workspace/runs/demo-dpo-start"
    assert f"\n  python -m engine train assets/presets/demo.yaml --run-dir {start}\n" in bare.stdout
    chained = f"python -m engine train {PRESETS / 'demo-dpo.yaml'} --init-from {start} --set train.max_steps=2"
    assert chained in bare.stdout

    chain = engine("check", str(PRESETS / "demo-dpo.yaml"), "--init-from", str(sft_run))
    assert chain.returncode == 0, chain.stderr
    assert "meant to continue" not in chain.stdout
    assert re.search(rf"^starts from: .*\({re.escape(str(sft_run / 'adapter'))}\)", chain.stdout, re.MULTILINE)
    plain = engine("check", str(PRESETS / "demo.yaml"))
    assert plain.returncode == 0 and "meant to continue" not in plain.stdout


def _step_lines(output: str, kind: str = "train") -> dict[int, str]:
    """The progress line of each logged step of ``kind`` (train, eval), by step."""
    return {int(step): line for line, step in re.findall(rf"^({kind} step (\d+)/\d+ .*)$", output, re.MULTILINE)}


def test_grpo_from_a_run_prints_its_rewards(sft_run: Path, tmp_path: Path):
    run_dir = tmp_path / "grpo"
    sets = ["train.max_steps=2", "train.per_device_batch_size=8", "grpo.num_generations=4", "grpo.beta=0.05"]
    result = engine(
        "train", str(PRESETS / "demo-grpo.yaml"), "--run-dir", str(run_dir), "--init-from", str(sft_run), *QUICK,
        *(part for item in sets for part in ("--set", item)),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "meant to continue" not in result.stdout
    lines = _step_lines(result.stdout)
    assert _step_lines((run_dir / "train.log").read_text()) == lines  # the run's own log says the same
    events = [event for event in iter_metrics(run_dir) if event["event"] == "train"]
    assert sorted(lines) == [event["step"] for event in events] == [1, 2]
    for event in events:
        line = lines[event["step"]]
        for key in ("reward", "reward_std", "completions/mean_length", "kl", "entropy"):  # kl: beta > 0
            assert f" | {key} {event[key]:.4g} |" in line, line
        assert line.index("| reward ") < line.index("| loss ")  # the method's metrics first


def test_dpo_prints_its_reward_margins(tmp_path: Path):
    run_dir = tmp_path / "dpo"
    sets = ["train.max_steps=2", "train.eval_steps=2", "train.eval_batch_size=8", "data.max_samples=16"]
    result = engine(
        "train", str(PRESETS / "demo-dpo.yaml"), "--run-dir", str(run_dir), *QUICK,
        *(part for item in sets for part in ("--set", item)), "--set", "train.eval_strategy=steps",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    events = {(event["event"], event["step"]): event for event in iter_metrics(run_dir)}
    for kind, prefix in (("train", ""), ("eval", "eval_")):
        lines = _step_lines(result.stdout, kind)
        assert lines, result.stdout
        assert _step_lines((run_dir / "train.log").read_text(), kind) == lines
        for step, line in lines.items():
            event = events[(kind, step)]
            for key in ("rewards/margins", "rewards/chosen", "rewards/rejected", "rewards/accuracies"):
                assert f" | {key} {event[prefix + key]:.4g}" in line, line
    assert "meant to continue a run" in result.stdout  # trained bare, as asked, after saying so


# --- refusals ------------------------------------------------------------------------------------------------


@pytest.fixture
def closed_folder(tmp_path: Path) -> Path:
    """A folder in which no folder can be made: read-only for a user, and /sys (the kernel's) for root."""
    if os.geteuid() == 0:
        return Path("/sys")
    folder = tmp_path / "read-only"
    folder.mkdir(mode=0o500)
    return folder


def test_train_refuses_a_run_dir_it_cannot_make_or_that_is_not_a_run(tmp_path: Path, closed_folder: Path):
    config = str(PRESETS / "demo.yaml")
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    refused(
        engine("train", config, "--run-dir", str(blocker / "run")),
        f"cannot create the run directory {blocker / 'run'}: {blocker} is a file, not a folder",
    )
    refused(
        engine("train", config, "--run-dir", str(closed_folder / "engine-run")),
        f"no folder can be made in {closed_folder}",
    )
    refused(
        engine("train", config, "--workspace", str(blocker / "ws")),
        f"cannot make runs in the workspace {blocker / 'ws'}: {blocker} is a file, not a folder",
    )
    refused(engine("train", config, "--workspace", str(closed_folder / "ws")), "no folder can be made in")
    folder = tmp_path / "my-project"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    refused(engine("train", config, "--run-dir", str(folder)), "already exists and is not a run directory")
    assert [path.name for path in folder.iterdir()] == ["notes.txt"] and blocker.read_text() == "mine"


def test_export_refuses_a_workspace_it_cannot_make(sft_run: Path, tmp_path: Path, closed_folder: Path):
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    refused(
        engine("export", str(sft_run), "--workspace", str(blocker / "ws")),
        f"cannot write the export into {blocker / 'ws' / 'exports'}: {blocker} is a file, not a folder",
    )
    refused(engine("export", str(sft_run), "--workspace", str(closed_folder / "ws")), "no folder can be made in")


def test_evaluate_refuses_a_negative_or_zero_row_count(sft_run: Path):
    for count in ("-1", "0"):
        result = engine("evaluate", str(sft_run), "--max-rows", count)
        assert result.returncode == 2 and f"argument --max-rows: must be 1 or more, not {count}" in result.stderr
    assert not (sft_run / "evaluations").exists()


def test_an_empty_config_file_is_refused_not_ready_to_train(tmp_path: Path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing here yet\n")
    refused(engine("check", str(empty)), f"{empty} is empty")
    refused(engine("train", str(empty), "--run-dir", str(tmp_path / "run")), f"{empty} is empty")
    assert not (tmp_path / "run").exists()
