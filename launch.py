"""Start the Tuning Studio in a browser: ``python launch.py [--host H] [--port P] [--workspace DIR] ...``.

Every flag has an environment variable (STUDIO_HOST, STUDIO_PORT, STUDIO_WORKSPACE, STUDIO_AUTH,
STUDIO_AUTH_FILE, STUDIO_SHARE, STUDIO_NO_STANDBY, STUDIO_ALLOWED_PATHS, STUDIO_DEMO, STUDIO_MAX_UPLOAD_MB,
STUDIO_DEMO_LIMITS); a flag wins over its variable. It is also the Hugging Face Space entry point
(``app_file: launch.py``): with SPACE_ID set it binds 0.0.0.0:7860 as a Space must, and serves the public demo mode
unless STUDIO_DEMO=0.
The default binds 127.0.0.1 only: the studio starts processes on this machine, so it is not exposed to the
network unless asked (and then, please, with --auth).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from studio.demo.policy import DemoPolicy

ROOT = Path(__file__).resolve().parent
ALLOWED_PATHS_ENV = "STUDIO_ALLOWED_PATHS"  # read by studio.path_guard
if str(ROOT) not in sys.path:  # run from any directory, installed or not
    sys.path.insert(0, str(ROOT))


def parse_auth(value: str) -> tuple[str, str]:
    """USER:PASS -> (user, pass); the password may itself contain colons."""
    user, sep, password = value.strip().partition(":")
    if not sep or not user or not password:
        raise argparse.ArgumentTypeError(f"expected USER:PASS, got {value!r}")
    return user, password


def read_auth_file(path: Path) -> list[tuple[str, str]]:
    """One USER:PASS per line; blank lines and # comments are ignored."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [parse_auth(line) for line in lines if line.strip() and not line.lstrip().startswith("#")]


def demo_wanted(environ: Mapping[str, str] | None = None) -> bool:
    """Demo mode from the environment: STUDIO_DEMO=1, or on a Space (SPACE_ID set) unless STUDIO_DEMO=0."""
    env = os.environ if environ is None else environ
    flag = env.get("STUDIO_DEMO", "").strip()
    return flag == "1" or (bool(env.get("SPACE_ID")) and flag != "0")


def parser() -> argparse.ArgumentParser:
    """The command line; defaults come from the STUDIO_* environment variables."""
    env = os.environ.get
    on_space = bool(env("SPACE_ID"))
    p = argparse.ArgumentParser(prog="python launch.py", description="Start the Tuning Studio web UI.")
    p.add_argument(
        "--host",
        default=env("STUDIO_HOST") or ("0.0.0.0" if on_space else "127.0.0.1"),
        help="interface to bind (default 127.0.0.1, this machine only; 0.0.0.0 on a Hugging Face Space)",
    )
    p.add_argument("--port", type=int, default=int(env("STUDIO_PORT") or 7860), help="port (default 7860, a Space's)")
    p.add_argument(
        "--workspace",
        type=Path,
        default=Path(env("STUDIO_WORKSPACE") or "workspace"),
        help="directory that holds the runs (default ./workspace)",
    )
    p.add_argument(
        "--share", action="store_true", default=env("STUDIO_SHARE", "") == "1", help="also open a gradio.live link"
    )
    p.add_argument(
        "--auth",
        type=parse_auth,
        action="append",
        metavar="USER:PASS",
        help="require this login (repeatable; env STUDIO_AUTH, comma-separated)",
    )
    p.add_argument(
        "--auth-file",
        type=Path,
        default=Path(env("STUDIO_AUTH_FILE")) if env("STUDIO_AUTH_FILE") else None,
        help="file with one USER:PASS per line",
    )
    p.add_argument(
        "--no-standby",
        action="store_true",
        default=env("STUDIO_NO_STANDBY", "") == "1",
        help="do not keep a warm training process ready (saves ~0.5 GB of memory; each Start then takes "
        "several seconds longer)",
    )
    p.add_argument(
        "--allow-path",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="also let the page use datasets, models and configs in DIR (repeatable; env STUDIO_ALLOWED_PATHS, "
        "separated by ':'); by default only the workspace, assets/ and uploads",
    )
    p.add_argument(
        "--demo",
        action="store_true",
        default=demo_wanted(),
        help="public demo mode: visitors train only the bundled demo model for a few hundred steps, one run at a "
        "time in a queue, see only their own runs, and name no server path (env STUDIO_DEMO=1; on by default "
        "on a Hugging Face Space unless STUDIO_DEMO=0)",
    )
    p.add_argument(
        "--max-upload-mb",
        type=float,
        default=float(env("STUDIO_MAX_UPLOAD_MB")) if env("STUDIO_MAX_UPLOAD_MB") else None,
        metavar="MB",
        help="largest file a page may upload (default 2048; 20 in demo mode; env STUDIO_MAX_UPLOAD_MB)",
    )
    p.add_argument(
        "--demo-limit",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="one of demo mode's limits, a number field of DemoPolicy in studio/demo/policy.py: keep_days=14, "
        "visitor_quota_mb=500, max_jobs=1, max_steps=300, ... (repeatable; env STUDIO_DEMO_LIMITS, comma-separated; "
        "a flag wins over the variable)",
    )
    return p


def studio_policy(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> DemoPolicy:
    """The rules the studio serves under: demo mode's (one trusted proxy in front of a Space) or none, with the
    upload cap of --max-upload-mb and the limits of STUDIO_DEMO_LIMITS, then --demo-limit. ValueError names a
    limit that is not one or a value it cannot take."""
    from studio.demo.policy import DemoPolicy

    env = os.environ if environ is None else environ
    proxy_hops = 1 if env.get("SPACE_ID") else 0  # a Space's proxy appends the visitor's address
    limits = [item for item in env.get("STUDIO_DEMO_LIMITS", "").split(",") if item.strip()] + args.demo_limit
    policy = DemoPolicy(enabled=bool(args.demo), max_upload_mb=args.max_upload_mb, proxy_hops=proxy_hops)
    return policy.with_limits(limits)


def allow_paths(folders: list[Path]) -> None:
    """Add the --allow-path folders to STUDIO_ALLOWED_PATHS, where the studio's path checks read them."""
    listed = [item for item in os.environ.get(ALLOWED_PATHS_ENV, "").split(os.pathsep) if item]
    listed += [str(folder.expanduser().resolve()) for folder in folders]
    if listed:
        os.environ[ALLOWED_PATHS_ENV] = os.pathsep.join(listed)


def logins(args: argparse.Namespace) -> list[tuple[str, str]] | None:
    """Every login from --auth, STUDIO_AUTH and --auth-file; None means no login required."""
    found = list(args.auth or [])
    if not found and os.environ.get("STUDIO_AUTH"):
        found = [parse_auth(item) for item in os.environ["STUDIO_AUTH"].split(",") if item.strip()]
    if args.auth_file:
        found += read_auth_file(args.auth_file)
    return found or None


def main(argv: list[str] | None = None) -> None:
    """Parse the flags, build the studio and serve it until interrupted."""
    args = parser().parse_args(argv)
    auth = logins(args)
    from studio.app import build_app, launch_options, paced_queue  # after parsing: --help stays instant

    args.workspace.mkdir(parents=True, exist_ok=True)
    allow_paths(args.allow_path)
    try:
        policy = studio_policy(args)
    except ValueError as exc:
        parser().error(f"--demo-limit / STUDIO_DEMO_LIMITS: {exc}")
    if policy.enabled:
        print(f"demo mode: the bundled model only, at most {policy.max_steps} steps, one run at a time in a queue")
    demo = build_app(args.workspace, policy)
    if not args.no_standby:
        from engine.runs.control import keep_standby

        keep_standby(args.workspace)  # imports the training libraries now, so that Start does not wait for them
    if args.host not in ("127.0.0.1", "localhost", "::1") and not auth and not os.environ.get("SPACE_ID"):
        print(f"warning: serving on {args.host} without --auth; anyone who can reach it can start and stop runs")
    paced_queue(demo).launch(
        server_name=args.host,
        server_port=args.port,
        share=args.share,
        auth=auth,
        # Gradio's launch sends one HEAD request to the local URL with a 3 s timeout and, when that times out,
        # refuses to start ("When localhost is not accessible, a shareable link must be created"): on a busy
        # machine the freshly started server answered later and the studio exited with 1. The check is for hosted
        # notebooks, which need a share link; ``_frontend=False`` skips only it (the one place gradio 6 reads it).
        _frontend=False,
        **launch_options(args.workspace, policy),
    )


if __name__ == "__main__":
    main()
