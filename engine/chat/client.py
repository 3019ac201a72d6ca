"""Chat with a base model, or a run's final adapter / model, or one of its checkpoints.

The model lives in a worker subprocess (``python -m engine chat-worker``, see engine.chat.worker) so that
generation never blocks the studio's event loop, a running training keeps its CPU share (the worker runs at a
lower priority and on one thread while a run is active), and unloading frees the memory for real (the process
exits). The two talk in JSON lines: requests on the worker's stdin, events on its stdout.

This module is what the parent imports: ``ChatClient``, and (from engine.chat.spec) the sampling parameters, the
model spec and the checks. It imports the standard library and the config only (no torch), so the studio can use
it freely.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from engine.chat.images import ImageRefused, chat_images, text_only_refusal
from engine.chat.line import MAX_WAITING, SUPERSEDED, WITHDRAWN, Line
from engine.chat.reply import Reply
from engine.chat.spec import (
    ROLES,
    ChatError,
    LoadProgress,
    ModelInfo,
    ModelSpec,
    ResolvedModel,
    SamplingParams,
    chat_tools,
    check_messages,
    kept_chars,
    parse_sampling,
    resolve_model,
    too_long,
)
from engine.store.processes import engine_command, engine_env

if TYPE_CHECKING:
    from engine.chat.seats import ChatSeats

LOAD_TIMEOUT = 600.0  # a large model from a slow disk; the demo model loads in seconds
TOKEN_TIMEOUT = 300.0  # the longest wait for the next event of a reply (a big prompt on a busy CPU)


CHILD_ENV = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "TOKENIZERS_PARALLELISM": "false"}
_EXIT = {"event": "exit"}  # put on every queue when the worker's output ends


# Re-exported: the studio and the tests name these through the client, as before the split.
__all__ = [
    "MAX_WAITING",
    "ROLES",
    "SUPERSEDED",
    "WITHDRAWN",
    "ChatClient",
    "ChatError",
    "LoadProgress",
    "ModelInfo",
    "ModelSpec",
    "Reply",
    "ResolvedModel",
    "SamplingParams",
    "chat_tools",
    "parse_sampling",
    "resolve_model",
]


class ChatClient:
    """The parent's handle on one chat worker: load, generate (streamed), stop, unload. Thread-safe.

    One model at a time: ``load`` replaces the loaded one. The worker writes one reply at a time: a new
    ``generate`` stops the caller's own reply still running (a reply nobody reads any more must not hold the
    worker) or waiting in line, and waits in line, first come first served, behind other callers' replies, so that
    no caller can cut off or stop another's (a model open to everyone, on a public demo) and each holds at most one
    place in line. A load or an unload by a caller takes a place in the same line: it replaces the model only once
    the replies ahead of it are written. A model can be loaded for an ``owner`` (an opaque tag; the studio's demo
    mode uses a digest of the visitor id): then only that owner may chat with it, stop its replies or unload it
    (``may_use``). A model loaded without one is open to everyone. Clients given the same ``seats``
    (engine.chat.seats) run at most that many workers at once; a model of theirs unused for long is unloaded when
    another needs its seat.
    """

    def __init__(self, workspace: Path | None = None, max_waiting: int = MAX_WAITING, seats: ChatSeats | None = None):
        self.workspace = Path(workspace).resolve() if workspace is not None else None
        self.max_waiting = max_waiting  # a request that finds this many in line is refused (ChatError LINE_FULL)
        self.info: ModelInfo | None = None
        self.loading: LoadProgress | None = None  # while a load is under way
        self.owner: str | None = None  # whom the loaded (or loading) model serves; None: everyone
        # The last reply to end, whoever asked for it: a look from outside (a caller reads its own Reply.finish).
        self.last_finish: dict[str, Any] = {}
        self.last_used = time.monotonic()  # when a load or a reply last began or ended
        self.unused_label: str | None = None  # the model unloaded for being unused (seats), until the next load
        self._seats = seats
        if seats is not None:
            seats.join(self)
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None  # the worker's stderr
        self._lock = threading.RLock()
        self._turn = threading.Condition(self._lock)  # notified whenever the reply being written ends
        self._line = Line(self._turn)  # the requests waiting for their turn (engine.chat.line)
        self._ids = itertools.count(1)
        self._current: int | None = None
        self._current_caller: str | None = None  # who asked for the reply being written
        self._replies: dict[int, queue.Queue[dict[str, Any]]] = {}

    @property
    def pid(self) -> int | None:
        """The worker's process id, while it runs."""
        return self._process.pid if self._process and self._process.poll() is None else None

    @property
    def waiting(self) -> int:
        """How many requests (replies, loads, unloads) wait in line for the worker (not counting those on their
        way out of it)."""
        return self._line.waiting

    def ahead_of(self, caller: str | None) -> int:
        """How many replies, loads and unloads of other callers a request of ``caller`` would wait for now: the reply
        being written and those in line (a snapshot: the line moves on)."""
        with self._lock:
            writing = self._current is not None and self._current_caller != caller
            return writing + self._line.waiting_for_others(caller)

    def may_use(self, caller: str | None) -> bool:
        """Whether ``caller`` may chat with the loaded model, see its name, stop its reply or unload it: always
        for a model loaded without an owner, else only its owner."""
        owner = self.owner
        return owner is None or owner == caller

    def load(
        self, spec: ModelSpec, timeout: float = LOAD_TIMEOUT, owner: str | None = None, caller: str | None = None
    ) -> Iterator[LoadProgress]:
        """Start a worker for ``spec``, yielding its progress until the model is ready (then ``info`` is set).
        With ``owner``, the model serves that owner only (``may_use``), from its first progress line on. The
        replies of callers other than ``caller`` ahead in line are written first (never cut off).

        Raises ChatError for a bad spec (before any process starts), when loading fails, when the line does not
        move for TURN_TIMEOUT seconds, or when an unload or another load replaces this one meanwhile; NoSeat
        (engine.chat.seats) when the client's seats are all held by models in use.
        """
        resolved = resolve_model(spec)  # fail fast, with the same message the worker would give
        with self._seats.seat(self) if self._seats is not None else contextlib.nullcontext():
            yield from self._load(spec, resolved, timeout, owner, caller)

    def _load(
        self, spec: ModelSpec, resolved: ResolvedModel, timeout: float, owner: str | None, caller: str | None
    ) -> Iterator[LoadProgress]:
        with self._lock:
            self._wait_for_turn(next(self._ids), caller)
            worker = self._detach()
            self.unused_label, self.last_used = None, time.monotonic()
        self._end(worker)  # the old model's memory is free before the new one loads
        with self._lock:
            # The process, its owner and its progress line change in one step: the line names the model, so no
            # one else may ever read it under another owner. A load that began meanwhile is replaced.
            stale = self._detach()
            process, events = self._spawn(spec, owner)
            first = self.loading = LoadProgress(0.02, f"starting the chat process for {resolved.label}")
        self._end(stale)
        deadline = time.monotonic() + timeout
        try:
            yield first
            while True:
                event = self._next(events, deadline, "the model to load")
                with self._lock:  # a load replaced meanwhile must not set the name or progress of the new one
                    current = self._process is process
                    if current and event["event"] == "ready":
                        self.info, self.loading = ModelInfo(**event["info"]), None
                        self.last_used = time.monotonic()
                        return
                    if current and event["event"] == "progress":
                        self.loading = progress = LoadProgress(float(event["fraction"]), str(event["message"]))
                if not current:
                    raise ChatError("loading was called off: the model was unloaded or another one loaded")
                if event["event"] != "progress":
                    raise ChatError(event.get("message") or self._exit_message(process))
                yield progress
        except BaseException:
            self._end(self._detach_if(process))
            raise

    def _spawn(self, spec: ModelSpec, owner: str | None) -> tuple[subprocess.Popen[bytes], queue.Queue[dict[str, Any]]]:
        """Start the worker for ``owner`` and the thread that reads its events (call with the lock held);
        returns it and its queue of load events."""
        command = engine_command("chat-worker", *spec.to_args())
        if self.workspace is not None:
            command += ["--workspace", str(self.workspace)]
        # The worker's stderr (warnings and, on a crash, the traceback) goes to an already-unlinked file:
        # nothing is left behind, even when the studio is killed.
        self._log = tempfile.TemporaryFile(prefix="chat-worker-")  # noqa: SIM115 (lives as long as the worker)
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=engine_env(CHILD_ENV)
        )
        self._process, self.owner, events = process, owner, queue.Queue()
        threading.Thread(target=self._read, args=(process, events), daemon=True, name="chat-reader").start()
        return process, events

    def _read(self, process: subprocess.Popen[bytes], load_events: queue.Queue[dict[str, Any]]) -> None:
        """Route one worker's events: reply events to their reply's queue, the others to the load queue."""
        assert process.stdout is not None
        for line in process.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # not ours: the worker keeps its protocol on a stream of its own
            if "id" not in event:
                load_events.put(event)
            elif (reply := self._replies.get(event["id"])) is not None:
                reply.put(event)  # events of a reply nobody waits for any more are dropped
        load_events.put(_EXIT)
        why = self._exit_message(process)
        with self._lock:
            if self._process is process:  # it died on its own: whoever waits must hear of it
                self.info, self.owner = None, None
                self._wake_replies(why)

    def _wake_replies(self, why: str) -> None:
        for waiting in self._replies.values():
            waiting.put({**_EXIT, "message": why})

    def _next(self, events: queue.Queue[dict[str, Any]], deadline: float, what: str) -> dict[str, Any]:
        try:
            return events.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise ChatError(f"timed out waiting for {what}") from None

    def _exit_message(self, process: subprocess.Popen[bytes] | None) -> str:
        """Why the worker ended: the last line of its log (the exception) and its exit code."""
        try:
            code = process.wait(5) if process else None
        except subprocess.TimeoutExpired:  # it closed its output but is still exiting (a busy machine): say so
            code = None
        try:  # pread leaves the offset the worker writes at alone
            fd = self._log.fileno() if self._log else -1
            size = os.fstat(fd).st_size
            tail = os.pread(fd, min(size, 8192), max(0, size - 8192)).decode(errors="replace").strip().splitlines()
        except (OSError, ValueError):
            tail = []  # closed by an unload meanwhile
        ended = f"exit code {code}" if code is not None else "still exiting"
        return f"the chat process ended ({ended})" + (f": {tail[-1]}" if tail else "")

    def _send(self, request: dict[str, Any]) -> None:
        process = self._process
        if process is None or process.stdin is None or process.poll() is not None:
            raise ChatError("no model is loaded; load one first")
        try:
            process.stdin.write((json.dumps(request) + "\n").encode())
            process.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise ChatError(self._exit_message(process)) from None

    def generate(
        self,
        messages: list[dict[str, Any]],
        sampling: SamplingParams,
        use_adapter: bool = True,
        caller: str | None = None,
        tools: Any = None,
    ) -> Reply:
        """The reply to ``messages`` (system / user / assistant turns, ending with a user turn), streamed as text
        deltas as it is iterated. ``use_adapter=False`` answers with the base model under a loaded adapter. After
        the last delta, the reply's ``finish`` tells why it ended: "stop" (end of turn), "length" or "cancelled"
        (and ``last_finish`` too, until another reply ends). A model loaded
        for an owner answers only when ``caller`` is that owner (checked with the request sent, so a model
        loaded by someone else in between never answers). ``tools``: the functions the model may call, rendered
        by its chat template as a tool-calling run was trained (``chat_tools``). A user turn may carry ``images``
        (paths of image files, engine.chat.images) for a vision-language model; a text model refuses them here.
        Nothing is checked or sent before the first delta is asked for."""
        return Reply(self._reply(messages, sampling, use_adapter, caller, tools))

    def _reply(
        self,
        messages: list[dict[str, Any]],
        sampling: SamplingParams,
        use_adapter: bool,
        caller: str | None,
        tools: Any,
    ) -> Generator[str, None, dict[str, Any]]:
        check_messages(messages)
        offered = chat_tools(tools)
        try:
            images = chat_images(messages)
        except ImageRefused as exc:
            raise ChatError(str(exc)) from None
        replies: queue.Queue[dict[str, Any]] = queue.Queue()
        with self._lock:
            request = (caller, use_adapter, bool(images), kept_chars(messages))
            self._check_request(*request)
            request_id = next(self._ids)
            self._wait_for_turn(request_id, caller, lambda: self._check_request(*request))
            self._cancel()  # the caller's own reply before this one: nobody reads it any more
            self._current, self._current_caller, self.last_used = request_id, caller, time.monotonic()
            self._replies[request_id] = replies
            self._send(
                {"op": "generate", "id": request_id, "messages": messages, "sampling": sampling.model_dump()}
                | {"adapter": use_adapter, "tools": offered}
            )
        finished = False
        try:
            while True:
                event = self._next(replies, time.monotonic() + TOKEN_TIMEOUT, "the next token")
                if event["event"] == "token":
                    yield event["text"]
                elif event["event"] == "done":
                    finished = True
                    self.last_finish = event
                    return event
                else:
                    finished = True
                    raise ChatError(event.get("message") or "the chat process ended")
        finally:
            with self._lock:
                self._replies.pop(request_id, None)
                self.last_used = time.monotonic()
                if not finished and self._current == request_id:
                    with contextlib.suppress(ChatError):
                        self._cancel()  # the caller walked away mid-reply
                if self._current == request_id:
                    self._current = None
                    self._turn.notify_all()

    def _check_request(self, caller: str | None, use_adapter: bool, images: bool, chars: int) -> None:
        """ChatError when the loaded model cannot take this request (call with the lock held): ``chars``, what the
        prompt always keeps (engine.chat.spec.kept_chars), more than its context can hold is refused here rather
        than tokenized by the worker while others wait."""
        if self.info is None:
            raise ChatError("no model is loaded; load one first")
        if not self.may_use(caller):
            raise ChatError("the loaded model is someone else's; load one of yours")
        if use_adapter is False and not self.info.is_adapter:
            raise ChatError("the loaded model has no adapter to switch off; load a LoRA run or checkpoint")
        if images and not self.info.vision:
            raise ChatError(text_only_refusal(self.info.label))
        if self.info.max_message_chars is not None and chars > self.info.max_message_chars:
            raise too_long(self.info.context_length)

    def _wait_for_turn(self, request_id: int, caller: str | None, recheck: Callable[[], None] = lambda: None) -> None:
        """Wait in line (lock held, released while waiting) until the request is first and the reply being written,
        if any, is the caller's own (engine.chat.line.Line.wait_for_turn)."""

        def free() -> bool:
            return self._current is None or self._current_caller == caller

        self._line.wait_for_turn(request_id, caller, free, self.max_waiting, recheck)

    def stop(self, caller: str | None = None) -> bool:
        """End the caller's reply being generated (it finishes with reason "cancelled") and take their replies
        waiting in line out of it; False if none of theirs was running or waiting (another caller's reply is theirs
        to stop) or ``caller`` may not use the model (``may_use``)."""
        with self._lock:
            if not self.may_use(caller):
                return False
            withdrawn = self._line.withdraw(caller, WITHDRAWN)
            return (self._current_caller == caller and self._cancel()) or withdrawn

    def _cancel(self) -> bool:
        """Cancel the reply being generated (call with the lock held; callers check whose it is)."""
        if self._current is None or self.pid is None:
            return False
        self._send({"op": "cancel", "id": self._current})
        self._current = None
        self._turn.notify_all()
        return True

    def unload_for(self, caller: str | None, timeout: float = 10.0) -> bool:
        """Unload the model when ``caller`` may use it (``may_use``); False, and it stays loaded, when not. The
        replies of other callers ahead in line are written first (ChatError when the line does not move for
        TURN_TIMEOUT seconds). Checked and detached in one step, so a model someone else loads meanwhile is never
        the one unloaded."""
        with self._lock:
            if not self.may_use(caller):
                return False
            self._wait_for_turn(next(self._ids), caller)
            if not self.may_use(caller):  # someone else's model was loaded while this waited
                return False
            worker = self._detach()
        self._end(worker, timeout)
        return True

    def unload_if_unused(self, idle_s: float) -> bool:
        """Unload the model when nothing has used it for ``idle_s`` seconds: no load, reply or request in line since
        (``unused_label`` then names it); whether it was."""
        with self._lock:
            idle = self._current is None and self._line.empty and self.loading is None
            if not idle or self.pid is None or time.monotonic() - self.last_used < idle_s:
                return False
            label = self.info.label if self.info is not None else None
            worker = self._detach()
            self.unused_label = label
        self._end(worker)
        return True

    def unload(self, timeout: float = 10.0) -> None:
        """Stop the worker and wait for it to exit, which frees the model's memory. Harmless when none runs."""
        with self._lock:
            worker = self._detach()
        self._end(worker, timeout)

    def _detach(self) -> tuple[subprocess.Popen[bytes] | None, IO[bytes] | None]:
        """Forget the worker (call with the lock held): no model, no owner, no load under way, waiting replies
        woken. Returns the worker and its log, for ``_end``."""
        worker = (self._process, self._log)
        self._process, self._log = None, None
        self.info, self.owner, self.loading, self._current = None, None, None, None
        self._wake_replies("the model was unloaded")
        self._turn.notify_all()  # the replies waiting in line learn it too
        return worker

    def _detach_if(self, process: subprocess.Popen[bytes]) -> tuple[subprocess.Popen[bytes] | None, IO[bytes] | None]:
        """``_detach`` when ``process`` is still the worker (a failed load cleans up after itself only)."""
        with self._lock:
            return self._detach() if self._process is process else (None, None)

    def _end(self, worker: tuple[subprocess.Popen[bytes] | None, IO[bytes] | None], timeout: float = 10.0) -> None:
        """Ask a detached worker to exit, wait for it (kill it if it will not), then close its log."""
        process, log = worker
        if process is not None:
            try:
                if process.stdin:
                    process.stdin.write(b'{"op": "unload"}\n')
                    process.stdin.close()
            except (BrokenPipeError, ValueError):
                pass  # already gone
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)
        if log is not None:
            log.close()
