"""What several demo visitors chatting at once get: whose model still answers after the others loaded theirs, and
the memory the chat processes hold.

N visitors (4 by default) open Chat on a demo studio one after another; each loads a model and sends a message
through the Chat tab's own handlers, as their page does; then each sends a second message. Two rounds: each visitor
loads a run of their own (a LoRA adapter of the demo model, random weights: what matters is whose it is), then each
loads the bundled base model. Printed for each round: what each Load said, whether each second message was answered
(or what its visitor read instead), the chat processes running at the end and their memory (PSS: pages shared
between them split).

    python benchmarks/demo_chat_visitors.py [--visitors 4]
    PYTHONPATH=/path/to/older/tree python benchmarks/demo_chat_visitors.py     # the same visitors on another tree
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import tempfile
from collections.abc import Callable, Iterator
from html import unescape
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from engine import runs  # noqa: E402 (after the offline switch)
from engine.chat.client import ChatClient  # noqa: E402
from engine.config import parse_config  # noqa: E402
from engine.store.paths import PROJECT_ROOT  # noqa: E402
from engine.store.rundir import update_status  # noqa: E402
from studio.chat import actions  # noqa: E402
from studio.chat.tab import respond  # noqa: E402
from studio.demo.caller import Caller  # noqa: E402
from studio.demo.identity import mint_token  # noqa: E402
from studio.demo.policy import DemoPolicy, owner_tag  # noqa: E402

GREEDY_WIDGETS = [0, 0.9, 24, 1, ""]  # temperature, top_p, max_new_tokens, repetition_penalty, seed
NAMES = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
BASE = "base:assets/demo-model"


class Tab:
    """The Chat tab's Load and the client that answers a caller, on this tree: one client per visitor and per bundled
    model where studio.chat.pool exists, else the one client the whole studio shared."""

    def __init__(self, workspace: Path, policy: DemoPolicy):
        try:
            from studio.chat.pool import ChatClients
        except ImportError:
            self.shared, self.chats = ChatClient(workspace), None
        else:
            self.chats = ChatClients(workspace, policy)

    def client(self, caller: Caller) -> ChatClient:
        return self.chats.for_caller(caller) if self.chats else self.shared

    def load(self, caller: Caller, pick: str) -> Iterator[str]:
        if self.chats:
            return actions.load_pressed(self.chats, caller, pick)
        return actions.load_clicked(self.shared, caller, pick)

    def close(self) -> None:
        for client in self.chats.clients if self.chats else [self.shared]:
            client.unload()
        if self.chats:
            self.chats.seats.stop()


def plain(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html))).strip()


def send(tab: Tab, caller: Caller) -> str:
    """The caller's message through the tab's Send handler: "answered", or the note said instead."""
    message = "Write 2024-03-15 out in full."
    *_, (chat, *_, note) = respond(tab.client(caller), caller, message, "", "Chat", {}, *GREEDY_WIDGETS)
    answered = chat and chat[-1]["role"] == "assistant" and chat[-1]["content"]
    return "answered" if answered else f"refused: {plain(note)}"


def pss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return 0.0


def own_run(workspace: Path, name: str, visitor: str) -> str:
    """A finished run of ``visitor`` with a LoRA adapter of the demo model; its pick in the model list."""
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from engine.training.builders import to_lora_config

    config = parse_config({"name": name})
    run_dir = runs.create_run(config, run_dir=workspace / "runs" / name)
    base = AutoModelForCausalLM.from_pretrained(PROJECT_ROOT / "assets" / "demo-model")
    get_peft_model(base, to_lora_config(config)).save_pretrained(run_dir / "adapter")
    update_status(run_dir, state="completed", owner=owner_tag(visitor))
    return f"run:{name}"


def round_of(tab: Tab, callers: dict[str, Caller], pick: Callable[[str], str]) -> None:
    """Each visitor loads ``pick(name)`` and chats, then each chats again; the round's lines are printed."""
    loads = {}
    for name, caller in callers.items():
        loads[name] = plain(list(tab.load(caller, pick(name)))[-1])
        send(tab, caller)
    seconds = {name: send(tab, caller) for name, caller in callers.items()}
    pids = {tab.client(caller).pid for caller in callers.values()} - {None}
    for name in callers:
        print(f"{name:>6}: load: {loads[name][:100]}")
        print(f"{'':>6}  second message: {seconds[name][:100]}")
    answered = sum(result == "answered" for result in seconds.values())
    memory = sum(pss_mb(pid) for pid in pids)
    print(f"second messages answered: {answered} of {len(callers)}; chat processes: {len(pids)}, {memory:.0f} MB PSS")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visitors", type=int, default=4, choices=range(2, len(NAMES) + 1))
    args = parser.parse_args()
    key = secrets.token_bytes(32)
    policy = DemoPolicy(enabled=True, key=key)
    with tempfile.TemporaryDirectory(prefix="demo-chat-") as folder:
        workspace = Path(folder)
        tokens = {name: mint_token(key) for name in NAMES[: args.visitors]}
        callers = {name: Caller(workspace, policy, token) for name, token in tokens.items()}
        picks = {name: own_run(workspace, f"{name}-run", token) for name, token in tokens.items()}
        tab = Tab(workspace, policy)
        try:
            print(f"== {len(callers)} visitors, each loading a run of their own")
            round_of(tab, callers, picks.__getitem__)
            tab.close()
            tab = Tab(workspace, policy)
            print(f"== {len(callers)} visitors, each loading the bundled base model")
            round_of(tab, callers, lambda _: BASE)
        finally:
            tab.close()


if __name__ == "__main__":
    main()
