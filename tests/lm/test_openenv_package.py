"""rbjax as an OpenEnv package (``openenv.yaml``, ``server/``), checked by OpenEnv's own validator
(``openenv validate``, openenv 0.10.0) on a clean copy of the repository: the static level, the runtime level
with ``--skip-build`` (no Docker here), the runtime checks against ``server.app`` started as a local process
in place of the Docker image (OpenEnv's ``run_validation`` with a provider that starts it), and ``--url`` on
that running server. Skipped without OpenEnv (``pip install 'rbjax[openenv]'``); CI runs it in its own
environment."""

import hashlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("openenv")
pytestmark = pytest.mark.slow  # starts servers

REPO = Path(__file__).resolve().parents[2]
OPENENV = Path(sys.executable).with_name("openenv")


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    """The repository as a clean checkout holds it: tracked and new files that git does not ignore (the
    validator hashes the whole folder and refuses symlinks, which the local virtual environments hold)."""
    files = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    root = tmp_path_factory.mktemp("checkout") / "rbjax"
    for name in filter(None, files):
        if (REPO / name).is_file() and not (REPO / name).is_symlink():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
    return root


def validate(*args: str) -> tuple[int, dict]:
    """(exit status, JSON report) of ``openenv validate ARGS``."""
    done = subprocess.run([str(OPENENV), "validate", *args, "--json"], capture_output=True, text=True)
    return done.returncode, json.loads(done.stdout)


def statuses(report: dict) -> dict:
    return {r["check_id"]: r["status"] for r in report["results"]}


def test_the_static_level_passes_and_names_the_21_tools(package):
    from rbjax.agents.tools.specs import TOOL_NAMES

    code, report = validate(str(package), "--level", "static")
    assert code == 0 and report["verdict"] == "pass", report
    assert statuses(report) == {"static.manifest": "pass"}
    assert report["manifest"]["capabilities"]["declared_tools"] == list(TOOL_NAMES)


def test_the_runtime_level_without_docker_skips_the_build_only(package):
    code, report = validate(str(package), "--level", "runtime", "--skip-build")
    assert code == 0 and report["verdict"] == "warn", report
    assert statuses(report)["static.manifest"] == "pass" and statuses(report)["runtime.startup"] == "skip"


@pytest.fixture(scope="module")
def baked_tasks(tmp_path_factory) -> Path:
    """The tasks file the image bakes: server/Dockerfile's rbjax commands, run as written with /app a temporary
    folder (the image itself needs Docker, which CI lacks)."""
    app = tmp_path_factory.mktemp("app")
    lines = (REPO / "server" / "Dockerfile").read_text().replace("\\\n", " ").splitlines()
    steps = [part.strip() for line in lines if line.startswith("RUN ") for part in line[4:].split("&&")]
    commands = [shlex.split(step.replace("/app", str(app))) for step in steps if step.startswith("rbjax ")]
    assert len(commands) == 2, steps
    rbjax = Path(sys.executable).with_name("rbjax")
    for command in commands:
        done = subprocess.run([str(rbjax), *command[1:]], capture_output=True, text=True)
        assert done.returncode == 0, (command, done.stderr[-2000:])
    rows = [json.loads(line) for line in (app / "tasks.jsonl").read_text().splitlines()]
    assert sorted({r["days"] for r in rows}) == [1, 3] and len(rows) == 4, rows  # 2 stores x 2 horizons
    return app / "tasks.jsonl"


class LocalProcess:
    """An OpenEnv validation provider that starts the package's server (``server.app:app``) as a local process
    instead of building and starting its Docker image: OpenEnv's runtime checks then run against it as they
    would against the container, on a cold compilation cache as a fresh container has. It measures no network
    policy (that check is skipped)."""

    name = "local-process"
    supported_network_modes = frozenset({"public", "no-network"})

    def __init__(self, tasks: Path):
        from openenv.validation.types import ProviderCapability

        self.capabilities = frozenset({ProviderCapability.IMAGE_BUILD, ProviderCapability.EXEC})
        self.tasks, self.root, self.subjects = tasks, None, []

    def build(self, root, execution):
        self.root = Path(root)
        return "sha256:" + hashlib.sha256(str(root).encode()).hexdigest()

    def start(self, spec):
        from openenv.validation.providers import StartupError

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        cold = tempfile.mkdtemp(
            prefix="rbjax-xla-"
        )  # OpenEnv waits 30 s for /health, however slow the compile
        env = {**os.environ, **spec.env_vars, "RBJAX_TASKS": str(self.tasks), "PYTHONDONTWRITEBYTECODE": "1",
               "JAX_COMPILATION_CACHE_DIR": cold}  # fmt: skip
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "server.app:app", "--host", "127.0.0.1", "--port", str(port)],
            cwd=self.root, env=env, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        subject = Subject(process, f"http://127.0.0.1:{port}")
        self.subjects.append(subject)
        end = time.monotonic() + spec.startup_timeout_s
        while time.monotonic() < end:
            if process.poll() is not None:
                raise StartupError(f"server.app exited: {process.stderr.read()[-1000:]}")
            try:
                with urllib.request.urlopen(subject.base_url + "/health", timeout=1) as r:
                    if r.status == 200:
                        return subject
            except OSError:
                time.sleep(0.2)
        subject.stop()
        raise StartupError("server.app did not answer /health in time")


class Subject:
    def __init__(self, process, base_url):
        self.process, self.base_url = process, base_url

    def inspect(self):
        return {"pid": self.process.pid}

    def logs(self, max_bytes=65536):
        return ""

    def exec(self, argv, timeout_s):
        from openenv.validation.providers import ExecResult

        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        return ExecResult(done.returncode, done.stdout, done.stderr, 0.0)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()


def test_the_runtime_checks_pass_on_the_images_tasks(package, baked_tasks):
    """OpenEnv's runtime checks over the package's plan (server/runtime.json: a reset without a task, a view,
    then end_today until the episode is over): the server starts, every observation fits its schema, every
    step's reward is a number in the declared range, the state follows the episode."""
    from openenv.validation import Level, run_validation

    provider = LocalProcess(baked_tasks)
    report = run_validation(package, max_level=Level.RUNTIME, provider=provider).model_dump(mode="json")
    got = statuses(report)
    for check in ("static.manifest", "runtime.startup", "runtime.observation_schema",
                  "runtime.reward_well_formed", "runtime.state_contract"):  # fmt: skip
        assert got[check] == "pass", (check, [r for r in report["results"] if r["status"] != "pass"])
    assert report["verdict"] != "fail" and not [c for c, s in got.items() if s in ("fail", "error")]


def test_the_server_answers_health_while_its_pool_compiles(package, baked_tasks):
    """A fresh container compiles the pool's programs (about 25 s on 2 cores) before it can open a session;
    OpenEnv gives a server 30 s to answer /health. The server answers at once, says it is not ready, then is."""
    provider = LocalProcess(baked_tasks)
    provider.build(package, None)
    subject = provider.start(type("Spec", (), {"env_vars": {}, "startup_timeout_s": 30.0})())
    try:
        with urllib.request.urlopen(subject.base_url + "/rbjax/health", timeout=5) as r:
            assert json.load(r) == {"ready": False, "error": None}
        end = time.monotonic() + 300
        while time.monotonic() < end:
            with urllib.request.urlopen(subject.base_url + "/rbjax/health", timeout=5) as r:
                health = json.load(r)
            if health["ready"]:
                break
            time.sleep(0.5)
        assert health["ready"] and health["slots"] == 64 and health["free"] == 64, health
    finally:
        subject.stop()


def test_openenv_validate_url_passes_on_the_packages_server(package, baked_tasks):
    provider = LocalProcess(baked_tasks)
    provider.build(package, None)
    subject = provider.start(type("Spec", (), {"env_vars": {}, "startup_timeout_s": 120.0})())
    try:
        done = subprocess.run([str(OPENENV), "validate", "--url", subject.base_url, "--json"],
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        report = json.loads(done.stdout)
        assert report["passed"] and all(c["passed"] for c in report["criteria"]), report
        assert len(report["criteria"]) == 6
    finally:
        subject.stop()
