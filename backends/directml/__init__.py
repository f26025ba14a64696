"""The DirectML backend: the real DirectML.dll through the native runner (runner.c).

On Windows the runner runs natively on the default adapter (or WARP); on Linux it runs under Wine,
whose Direct3D 12 is vkd3d on a Vulkan driver (`vulkan`: auto, lavapipe or an ICD json; vulkan.py),
from the stack set up by scripts/setup_directml.sh or an unpacked portable one (`stack`; stack.py,
pack.py). One runner
process per backend instance (so one per pytest-xdist worker); a crash, hang or removed device
fails that case as `crashed` with the runner's last words, and the next case starts a new runner.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness.model.descriptor import Case
# dlls.py (DLL versions, fetching) is imported where it is used, never here: `python -m
# backends.directml.dlls` (scripts/setup_directml.sh) must not find itself imported by its package
# before it runs (RuntimeWarning: found in sys.modules ... prior to execution)
from harness.model.layout import total_bytes
from harness.spec.fused import activation_items, fused_choice
from harness.spec.load import load_specs
from harness.spec.model import SpecSet
from harness.model.validator import case_verdict
from harness.model.wellformed import CaseFormatError, check_case
from harness.run.options import DIRECTML_TIMEOUT

from harness.model.backend import Capabilities, Crashed, Outputs, Rejected, RunResult, TimedResult, Timing, Unsupported
from backends.directml.process import STACK_DIR, RunnerConfig, RunnerDied, RunnerProcess
from backends.directml.stack import Stack, default_stack_dir
from backends.directml.vulkan import VulkanDriver, resolve_vulkan

EXEC_FLAGS = {"ALLOW_HALF_PRECISION_COMPUTATION": 0x1, "DISABLE_META_COMMANDS": 0x2}
JSON_EXACT_INTEGER = 2**53  # the runner's JSON reader holds numbers as doubles
MAX_FAILED_STARTS = 3  # runner starts that fail in a row before the backend stops trying
# One runner request carries up to this many cases, with at most this many input and output bytes:
# enough to amortise the request, the submit and the fence (the GPU's per-case cost), small enough
# that a batch finishes far inside the per-case timeout, which a batch is also given. Measured
# (benchmarks/bench_directml.py, small cases, judged): on an NVIDIA H200 alone 2,590 cases/s in
# batches of 8 against 1,657 in batches of 64; with 16 runners at once about 1,400 against 400
# per runner (a request's time grew faster than its case count there: 6 ms for 8 cases, 160 ms
# for 64, about 3 s for 256); on lavapipe 3,988 against 4,091, the same within noise.
BATCH_CASES = 8
BATCH_BYTES = 32 << 20


def runner_path(stack: Path | None = None) -> Path:
    return Path(stack or default_stack_dir()) / "dmlrunner.exe"


def union_bytes(catalog: Any, type_enum: Any, value: Any) -> bytes:
    """A DML_SCALAR_UNION's 8 bytes: `value` stored as the data type `type_enum` names (little
    endian, the rest zero); as a UINT64 bit pattern of 0 when the type is unknown (an invalid case)."""
    dtype = next((t for t in catalog.data_types.values() if type_enum is not None and t.enum == int(type_enum)), None)
    if dtype is None or dtype.bits % 8:  # unknown, or a 4-bit type (DML_SCALAR_UNION has no 4-bit member)
        return bytes(8)
    with np.errstate(all="ignore"):
        raw = np.array(value, dtype=np.float64 if dtype.is_float else object).astype(dtype.numpy).tobytes()
    return raw.ljust(8, b"\0")


class DirectMLBackend:
    name = "directml"
    instance_option = "dll"  # `--backend directml@1.10.1`: that DirectML version (or wheel version) as an instance
    expectations_dir = Path(__file__).resolve().parent.parent / "expectations"  # known divergences, per backend

    @staticmethod
    def instance_problem(variant: str) -> str | None:
        """What is wrong with `directml@VARIANT`, found without starting anything (a run checks
        this before it touches the last run's reports): a DirectML.dll path that does not exist, or
        a version that versions.yaml does not know; None when it names a DLL this backend can use."""
        from .dlls import known_versions
        if variant.lower().endswith(".dll"):
            return None if Path(variant).is_file() else f"no DirectML.dll at {variant}"
        versions = known_versions()
        if any(variant in (v["wheel"], v["directml"]) for v in versions):
            return None
        allowed = ", ".join(sorted({v["directml"] for v in versions}))
        return f"unknown DirectML version {variant!r}; give a path to DirectML.dll or one of: {allowed}"

    def __init__(self, specs: SpecSet | None = None, dll: str | None = None, adapter: int = 0, warp: bool = False,
                 debug_layer: bool = False, exec_flags: int | str = 0, timeout: float = DIRECTML_TIMEOUT,
                 vulkan: str | None = None, stack: str | Path | None = None, cache_max: int | None = None,
                 gpus: str | None = None, **_: Any) -> None:
        self.specs = specs or load_specs()
        # --directml-gpus: this worker's Vulkan device (gpus.py); None: whatever the drivers list first
        self.vk_device: int | None = None
        if gpus:
            from backends.directml.gpus import count_gpus, gpu_for_worker, parse_gpus
            self.vk_device = gpu_for_worker(parse_gpus(gpus, count_gpus() if gpus.strip() == "all" else 0),
                                            os.environ.get("PYTEST_XDIST_WORKER"))
        self.vulkan_choice = vulkan  # None: auto
        self.stack_arg = str(stack) if stack else None  # None: DMLCONFORM_DIRECTML_STACK or .cache/directml
        self.stack = Stack(Path(stack).resolve() if stack else default_stack_dir())
        self._vulkan: VulkanDriver | None = None
        self.dll_name = dll
        self.adapter, self.warp, self.debug_layer = adapter, warp, debug_layer
        if isinstance(exec_flags, str):
            names = [f.strip() for f in exec_flags.split("|") if f.strip()]
            unknown = [n for n in names if n not in EXEC_FLAGS]
            if unknown:
                raise ValueError(f"unknown DirectML execution flag(s) {', '.join(unknown)}; known: {', '.join(EXEC_FLAGS)}")
            exec_flags = sum(EXEC_FLAGS[n] for n in names)
        self.exec_flags = int(exec_flags)
        self.timeout = timeout
        self.cache_max = cache_max  # the runner's compiled-operator cache (None: its default); tests make it small
        self._process: RunnerProcess | None = None
        self._info: dict | None = None
        self._dll: Path | None = None
        self._unavailable: str | None = None
        self._failed_starts = 0
        self._gave_up: str | None = None  # why the runner is not started again
        self._hung: dict[str, str] = {}  # descriptor key -> the hang it caused (see _remember_hang)
        self._hung_families: dict[tuple, list[str]] = {}  # (operator, tensor types) -> its hangs (_remember_hang)

    # --- availability ------------------------------------------------------------------------
    def vulkan(self) -> VulkanDriver | None:
        """The Vulkan driver the runner is given (None on Windows, where D3D12 is native)."""
        if self._vulkan is None and sys.platform != "win32":
            self._vulkan = resolve_vulkan(self.vulkan_choice, self.stack.lavapipe_icd)
        return self._vulkan

    def _config(self) -> RunnerConfig:
        if self._dll is None:
            from backends.directml.dlls import resolve
            self._dll = resolve(self.dll_name, self.stack.dll_dir)
        config = RunnerConfig(self.stack.runner, self._dll, self.adapter, self.warp, self.debug_layer,
                              stack=self.stack, vulkan=self.vulkan())
        if self.cache_max is not None:
            config.cache_max = self.cache_max
        config.vk_device = self.vk_device
        return config

    def available(self) -> tuple[bool, str]:
        if self._unavailable is not None:
            return False, self._unavailable
        from backends.directml.dlls import known_versions
        known = next((v for v in known_versions() if self.dll_name in (v["wheel"], v["directml"])), None)
        if known is not None and not known.get("runnable", True):
            self._unavailable = f"DirectML {known['directml']} does not run here: {known.get('note', 'marked not runnable')} (backends/directml/versions.yaml)"
            return False, self._unavailable
        if not self.stack.runner.exists():
            self._unavailable = (f"the runner is not built ({self.stack.runner}): run scripts/setup_directml.sh "
                                 "(Debian: installs Wine, lavapipe, DirectML.dll) or give --directml-stack DIR")
            return False, self._unavailable
        missing = self.stack.missing() if sys.platform != "win32" else None
        if missing is None and sys.platform != "win32":
            try:
                missing = self.stack.lavapipe_problem(self.vulkan())
            except ValueError as exc:  # a --directml-vulkan naming nothing usable
                missing = str(exc)
        if missing:
            self._unavailable = missing
            return False, self._unavailable
        try:
            self._ensure()  # which tries a failed start again (MAX_FAILED_STARTS in a row)
            return True, ""
        except (RunnerDied, FileNotFoundError, ValueError, OSError) as exc:  # VulkanChoiceError is a ValueError
            last: Exception = exc
        self._unavailable = f"the DirectML stack does not start here: {last}"
        self.close()  # an unavailable backend is never used, nor closed by its caller: stop our Xvfb now
        return False, self._unavailable

    def _ensure(self) -> RunnerProcess:
        """The running runner, started (again) if needed. A start that fails is tried again at
        once, up to MAX_FAILED_STARTS starts in a row (a start fails now and then under load: 1 of
        16 runners starting together on an NVIDIA H200, once in a few hundred restarts on lavapipe;
        a case must not be `crashed`, nor its rerun `flaky`, for that). After that it stops trying:
        every later case is `crashed` at once with the reason, instead of each one paying start-ups."""
        if self._gave_up is not None:
            raise RunnerDied(self._gave_up)
        if self._process is None:
            self._process = RunnerProcess(self._config())
        while not self._process.alive:
            try:
                self._process.start()
                header, _ = self._process.request({"cmd": "info"}, [], self.timeout)
            except (RunnerDied, OSError) as exc:
                self._failed_starts += 1
                if self._failed_starts >= MAX_FAILED_STARTS:
                    self._gave_up = f"the runner could not be restarted ({self._failed_starts} failed starts in a row): {exc}"
                    raise RunnerDied(str(exc)) from exc
                time.sleep(0.2 * self._failed_starts)
                continue
            self._failed_starts = 0
            self._info = header
        return self._process

    def replay_args(self) -> list[str]:
        """The `dmlconform replay` options that recreate this backend (only those not at their default)."""
        args: list[str] = []
        if self.dll_name:
            args += ["--directml-dll", str(self.dll_name)]
        if self.adapter:
            args += ["--directml-adapter", str(self.adapter)]
        if self.warp:
            args.append("--directml-warp")
        if self.debug_layer:
            args.append("--directml-debug-layer")
        if self.exec_flags:
            names = [name for name, bit in EXEC_FLAGS.items() if self.exec_flags & bit]
            args += ["--directml-exec-flags", "|".join(names)]
        if self.vulkan_choice and self.vulkan_choice != "auto":
            args += ["--directml-vulkan", self.vulkan_choice]  # auto may pick another device elsewhere: name what ran
        elif self._vulkan is not None and self._vulkan.kind == "hardware":
            args += ["--directml-vulkan", str(self._vulkan.icd)]
        if self.stack_arg:
            args += ["--directml-stack", self.stack_arg]
        if self.vk_device is not None:
            args += ["--directml-gpus", str(self.vk_device)]
        if self.timeout != DIRECTML_TIMEOUT:  # a case that hung under a short limit replays under it
            args += ["--directml-timeout", f"{self.timeout:g}"]
        return args

    def info(self) -> dict:
        """What the runner reported at its last start (adapter, feature level, types); started once if never."""
        if self._info is None:
            self._ensure()
        assert self._info is not None
        return self._info

    def version(self) -> str:
        info = self.info()
        vulkan = self.vulkan()
        through = f" (Vulkan: {vulkan.kind}, {vulkan.icd})" if vulkan is not None else ""
        if self.vk_device is not None:
            through += f" [Vulkan device {self.vk_device}]"
        from backends.directml.dlls import dll_file_version
        assert self._dll is not None  # info() started the runner, whose config resolved the DLL
        return (f"DirectML {dll_file_version(self._dll)} ({self._dll}) on {info.get('adapter')}{through}, "
                f"max FL {self.max_level()}, exec flags 0x{self.exec_flags:x}")

    def max_level(self) -> str:
        enum = int(self.info().get("max_feature_level", 0))
        try:
            return self.specs.catalog.level_by_enum(enum).name
        except KeyError:
            return self.specs.catalog.levels[0].name

    def supported_types(self) -> set[str]:
        types = self.info().get("types", {})
        return {t.name for t in self.specs.catalog.data_types.values() if types.get(str(t.enum))}

    def capabilities(self) -> Capabilities:
        level = self.max_level() if self._info is not None or self.available()[0] else None
        return Capabilities(max_feature_level=level, validates_descriptors=True,
                            data_types=self.supported_types() if self._info else None,
                            notes=["in-place binding rules are checked only by the DirectML debug layer"])

    def close(self) -> None:
        """The backend is done: stop the runner and its session's Xvfb."""
        if self._process is not None:
            getattr(self._process, "close", self._process.stop)()
            self._process = None

    def _drop_runner(self) -> None:
        """After a crash: stop the runner only; the next case starts a new one in the same session."""
        if self._process is not None:
            self._process.stop()

    # --- running ----------------------------------------------------------------------------
    def _unrepresentable(self, case: Case) -> str | None:
        """Why the runner cannot pass `case` to DirectML as written, or None. Field ranges, data
        types and buffer lengths are check_case's (run_case calls it first; repeated here for
        direct callers, so nothing truncated ever reaches the runner)."""
        spec = self.specs.operator(case.operator)
        try:
            check_case(case, spec)
        except CaseFormatError as exc:
            return f"not expressible in the C structs: {exc}"
        fields = {f.name for f in spec.tensor_fields}
        for name, t in case.descriptor.tensors.items():
            if name not in fields:
                return f"{name} is not a member of {spec.desc_struct}: not expressible in the C struct"
            if t is None:
                continue
            if len(t.sizes) != t.dim_count or (t.strides is not None and len(t.strides) != t.dim_count):
                return "Sizes/Strides are pointers to DimensionCount entries in the C ABI: a length mismatch is not expressible"
            if t.total_bytes is not None and t.total_bytes > JSON_EXACT_INTEGER:
                return "a TotalTensorSizeInBytes above 2^53 does not pass exactly through the runner's JSON (read as a double)"
        if case.descriptor.aliases and not self.debug_layer:
            verdict = case_verdict(spec, case)
            if {"in_place.not_allowed", "in_place.layout_mismatch"} & verdict.rule_ids:
                return "in-place binding rules are checked only by the DirectML debug layer (not enabled)"
        return None

    def request_for(self, case: Case) -> tuple[dict, list[bytes]]:
        spec = self.specs.operator(case.operator)
        d = case.descriptor
        # a tensor array's absent items are not tensors of the C struct (the array holds InputCount
        # items, then nothing): they get no entry and no binding
        names = [f.name for f in spec.tensor_fields if f.array_of is None or d.tensors.get(f.name) is not None]
        arrays = spec.tensor_arrays
        tensors: list[dict[str, Any]] = []
        buffers: list[bytes] = []
        for name in names:
            t = d.tensors.get(name)
            role = spec.field(name).role
            entry: dict[str, Any] = {"present": int(t is not None), "role": role, "name": name}
            if t is not None:
                dtype = self.specs.catalog.dtype(t.data_type)
                entry.update({"data_type": dtype.enum, "flags": t.flags, "dimension_count": t.dim_count, "sizes": list(t.sizes),
                              "strides": list(t.strides) if t.strides is not None else None,
                              "total_bytes": total_bytes(t, dtype), "alignment": t.alignment})
                if role == "input" and name in case.inputs:
                    entry["buffer"] = len(buffers)
                    buffers.append(case.inputs[name])
                if role == "output" and name in d.aliases:
                    entry["alias"] = names.index(d.aliases[name])
            tensors.append(entry)
        fields: list[dict[str, object]] = []  # the struct's fields, as the runner's JSON reads them
        for f in spec.fields:
            if f.array_of is not None:  # the array's pointer once, at its first item: the present items, in order
                if f.slot == 0:
                    fields.append({"kind": "tensors", "items": [names.index(n) for n in arrays[f.array_of] if n in names]})
            elif f.role != "attribute":
                fields.append({"kind": "tensor", "tensor": names.index(f.name)})
            elif f.struct is not None:  # a pointer to the members, or null when the descriptor has none
                present = any(f"{f.name}.{m}" in d.attributes for m, _ in f.struct)
                fields.append({"kind": "struct", "present": int(present),
                               "members": [{"kind": "float" if c == "FLOAT" else "uint", "value": d.attributes.get(f"{f.name}.{m}", 0.0)}
                                           for m, c in f.struct]})
            elif f.is_activation_array:  # consecutive DML_OPERATOR_DESCs, each an activation with null tensors; null when empty
                fields.append({"kind": "opdescs", "items": [
                    {"op_type": activation.operator_type, "fields": [
                        {"kind": "tensor", "tensor": -1} if a.role != "attribute" else {"kind": "float", "value": values[a.name]}
                        for a in activation.fields]}
                    for activation, values in activation_items(spec, f, d.attributes)]})
            elif f.is_fused_activation:  # DML_OPERATOR_DESC of the named activation, null tensors; or a null pointer
                activation = fused_choice(spec, f, d.attributes)
                if activation is None:
                    fields.append({"kind": "opdesc", "present": 0})
                else:
                    fields.append({"kind": "opdesc", "present": 1, "op_type": activation.operator_type, "fields": [
                        {"kind": "tensor", "tensor": -1} if a.role != "attribute" else
                        {"kind": "float", "value": float(d.attributes[f"{f.name}.{a.name}"])} for a in activation.fields]})
            elif f.is_scalar_union:  # 8 bytes inline: the member its typed_by field names, zero-filled
                fields.append({"kind": "union", "hex": union_bytes(self.specs.catalog, d.attributes.get(f.typed_by or ""),
                                                                    d.attributes.get(f.name, 0)).hex()})
            elif f.is_array:  # a pointer to the items; the count field says how many
                kind = {"FLOAT": "float", "INT": "int"}.get(f.element or "UINT", "uint")
                fields.append({"kind": "array", "items": [{"kind": kind, "value": v} for v in d.attributes.get(f.name, [])]})
            elif f.is_count and (f.count_of or ("",))[0] in arrays:
                fields.append({"kind": "uint", "value": sum(n in names for n in arrays[(f.count_of or ("",))[0]])})
            elif f.is_count:
                fields.append({"kind": "uint", "value": len(d.attributes.get((f.count_of or ("",))[0], []))})
            elif f.c_type in ("INT", "BOOL"):  # BOOL is a 4-byte int
                fields.append({"kind": "int", "value": int(d.attributes.get(f.name, f.default or 0))})
            elif f.c_type == "FLOAT":
                fields.append({"kind": "float", "value": float(d.attributes.get(f.name, f.default or 0.0))})
            else:
                fields.append({"kind": "uint", "value": int(d.attributes.get(f.name, f.default or 0))})
        key_tensors = [{k: v for k, v in t.items() if k != "buffer"} for t in tensors]
        header = {"cmd": "run", "op_type": spec.operator_type, "exec_flags": self.exec_flags, "fields": fields, "tensors": tensors}
        header["key"] = str(hash((spec.operator_type, self.exec_flags, repr(fields), repr(key_tensors))))
        return header, buffers

    def run(self, case: Case) -> RunResult:
        return self.run_batch([case])[0][0]

    def run_batch(self, cases: list[Case]) -> list[TimedResult]:
        """Every case's result and timing, in order. Cases go to the runner in batches (one request,
        each distinct descriptor compiled once, one submit and fence); when a batch's runner crashes,
        hangs or loses its device, its cases run again one by one on a restarted runner, so that
        only the case that caused it is `crashed` (one by one rather than bisected: a hang costs a
        whole timeout per probe, and bisecting a batch of 64 would pay six)."""
        results: list[TimedResult | None] = [None] * len(cases)
        pending: list[tuple[int, dict, list[bytes]]] = []
        for i, case in enumerate(cases):
            spec = self.specs.operators.get(case.operator)
            why = f"no spec for {case.operator}" if spec is None else self._unrepresentable(case)
            if why:
                results[i] = (Unsupported(why), Timing())
                continue
            header, buffers = self.request_for(case)
            why = self._not_sent(header) if len(cases) > 1 else None
            if why is not None:
                results[i] = (Crashed(why, sent=False), Timing())
                continue
            pending.append((i, header, buffers))
        for chunk in _chunks(pending):
            for i, result in self._run_chunk(chunk):
                results[i] = result
        return [r if r is not None else (Crashed("no result"), Timing()) for r in results]

    def _run_chunk(self, chunk: list[tuple[int, dict, list[bytes]]]) -> list[tuple[int, TimedResult]]:
        """One batch request for the chunk. When the runner dies while creating, compiling or
        initialising one case's operator (the runner announces each, in order), that case is the
        one that crashed and the others go again as a batch; when it dies later (the batch's
        upload, execute or readback, where the culprit cannot be told), the cases run one by one."""
        if not chunk:
            return []
        if len(chunk) == 1:
            _, header, buffers = chunk[0]
            return [(chunk[0][0], self._remember_hang(header, self._timed_send(header, buffers)))]
        answered, culprit = self._send_batch(chunk)
        if answered is not None:
            return [(i, result) for (i, _, _), result in zip(chunk, answered)]
        if culprit is None:
            out: list[tuple[int, TimedResult]] = []
            for i, header, buffers in chunk:  # one by one, in order: each hang found is known to the next
                why = self._not_sent(header)
                out.append((i, (Crashed(why, sent=False), Timing()) if why is not None
                            else self._remember_hang(header, self._timed_send(header, buffers))))
            return out
        position, crashed = culprit
        self._remember_hang(chunk[position][1], crashed)
        others = chunk[:position] + chunk[position + 1:]
        rest = [entry for entry in others if self._not_sent(entry[1]) is None]
        skipped = [(i, (Crashed(why, sent=False), Timing())) for i, header, _ in others if (why := self._not_sent(header)) is not None]
        return [(chunk[position][0], crashed)] + skipped + self._run_chunk(rest)

    def _not_sent(self, header: dict) -> str | None:
        """Why a case of a batch is not sent, or None: its descriptor hung earlier in this run, or
        FAMILY_HANGS other descriptors of its operator and tensor types did (_family)."""
        if header["key"] in self._hung:
            return self._hung[header["key"]]
        family = self._hung_families.get(_family(header), [])
        if len(family) >= FAMILY_HANGS:
            return (f"not run: {len(family)} other descriptors of this operator with these tensor types hung the device "
                    f"earlier in this run ({family[0][:300]})")
        return None

    def _remember_hang(self, header: dict, answer: TimedResult) -> TimedResult:
        """After a case hung: its descriptor is not sent again in a batch of this run (the other
        data sets of a descriptor that hung hang too, each costing a timeout and the GPU channel's
        teardown; NVIDIA H200, 2026-11-28). Those cases are `crashed`, saying so; a case asked for
        alone (a rerun, a replay) is always sent."""
        result = answer[0]
        if isinstance(result, Crashed) and "(hang" in result.reason:
            if header["key"] not in self._hung:
                self._hung_families.setdefault(_family(header), []).append(result.reason)
            self._hung[header["key"]] = (f"not run: its descriptor hung the device on an earlier case of this run "
                                         f"({result.reason[:300]})")
        return answer

    def _timed_send(self, header: dict, buffers: list[bytes]) -> TimedResult:
        start = time.perf_counter()
        result = self._send(header, buffers, None)
        return result, Timing(time.perf_counter() - start, self._last_stages)

    def _send_batch(self, chunk: list[tuple[int, dict, list[bytes]]]) -> tuple[list[TimedResult] | None, tuple[int, TimedResult] | None]:
        """One "batch" request for the chunk's cases: (their results, None); or, when the runner
        died or lost its device during it, (None, the culprit) where the runner's last announced
        stage names the case it was creating, compiling or initialising ((position, its crash)),
        else (None, None)."""
        items: list[dict] = []
        buffers: list[bytes] = []
        for _, header, own in chunk:
            item = {k: v for k, v in header.items() if k != "cmd"}
            item["tensors"] = [dict(t, buffer=t["buffer"] + len(buffers)) if t.get("buffer", -1) >= 0 else t
                               for t in header["tensors"]]
            items.append(item)
            buffers += own
        start = time.perf_counter()
        try:
            process = self._ensure()
            reply, outs = process.request({"cmd": "batch", "items": items}, buffers, self.timeout)
        except RunnerDied as exc:
            culprit = _culprit(getattr(self._process, "stage", None), len(chunk), str(exc), time.perf_counter() - start)
            self._drop_runner()
            return None, culprit
        elapsed = time.perf_counter() - start
        if reply.get("status") != "ok" or len(reply.get("items", [])) != len(chunk):
            if reply.get("status") == "device_removed":
                self._drop_runner()
            return None, None
        answered: list[TimedResult] = []
        used = 0
        wall = elapsed / len(chunk)  # the request's wall time, shared evenly (the stages say where it went)
        for (_, header, _), item in zip(chunk, reply["items"]):
            count = int(item.get("outputs", 0)) if item.get("status") == "ok" else 0
            result = self._classify(item, outs[used:used + count], header)
            used += count
            answered.append((result, Timing(wall, _stages(item))))
        return answered, None

    def _send(self, header: dict, buffers: list[bytes], spec) -> RunResult:
        self._last_stages: dict[str, float] = {}
        try:
            process = self._ensure()
            reply, outs = process.request(header, buffers, self.timeout)
        except RunnerDied as exc:
            where = getattr(self._process, "stage", None)
            if where is not None:  # the stage it hung or died in
                name, since = where
                self._last_stages = {name.split()[0]: round(time.monotonic() - since, 6)}
            self._drop_runner()  # the next case starts a new runner (unless it could not be restarted)
            return Crashed(str(exc))
        self._last_stages = _stages(reply)
        result = self._classify(reply, outs, header)
        if reply.get("status") == "device_removed":
            self._drop_runner()
        return result

    def _classify(self, reply: dict, outs: list[bytes], header: dict) -> RunResult:
        """A runner answer (a reply, or one item of a batch reply) as a result."""
        status = reply.get("status")
        if status == "ok":  # one buffer per present output, in field order
            names = [t["name"] for t in header["tensors"] if t["role"] == "output" and t["present"]]
            return Outputs(dict(zip(names, outs)))
        if status == "rejected":
            return Rejected(f"{reply.get('stage')} returned {reply.get('hr')} (E_INVALIDARG is 0x80070057)")
        if status == "accepted_not_run":
            return Outputs({})
        if status == "device_removed":
            words = self._process.last_words() if self._process else ""
            return Crashed(f"device removed at {reply.get('stage')} (hr {reply.get('hr')}); runner restarted{'; ' + words if words else ''}")
        return Crashed(f"runner error at {reply.get('stage')}: hr {reply.get('hr')}")


PER_CASE_STAGES = ("create", "compile", "initialize")  # announced per case, in order; the others per batch


def _culprit(stage: tuple[str, float] | None, count: int, reason: str, seconds: float) -> tuple[int, TimedResult] | None:
    """The case a batch's runner died on, from its last announced stage (`compile 5/64`), when that
    stage is one it goes through case by case: (its position, its crash with the stage's seconds)."""
    if stage is None:
        return None
    words = stage[0].split()
    if len(words) != 2 or words[0] not in PER_CASE_STAGES or "/" not in words[1]:
        return None
    index, _, total = words[1].partition("/")
    if not (index.isdigit() and total.isdigit()) or int(total) != count or not 1 <= int(index) <= count:
        return None
    elapsed = round(time.monotonic() - stage[1], 6)
    return int(index) - 1, (Crashed(f"{reason} (in {stage[0]} of a batch of {count})"), Timing(seconds, {words[0]: elapsed}))


def _stages(reply: dict) -> dict[str, float]:
    """The runner's stage timings of one answer ({"t": {stage: seconds}}), checked."""
    raw = reply.get("t")
    if not isinstance(raw, dict):
        return {}
    return {str(k): float(v) for k, v in raw.items() if isinstance(v, (int, float)) and 0 <= v < 1e7}


FAMILY_HANGS = 2  # distinct descriptors of one operator and tensor types that hung: its other descriptors are not batched


def _family(header: dict) -> tuple:
    """An operator with its tensors' data types: on an NVIDIA H200 every descriptor of such a
    family hung once one did (LP_NORMALIZATION, MEAN_VARIANCE_NORMALIZATION FLOAT32 and FLOAT16,
    2026-11-28), and a valid cell of ten descriptors cost ten timeouts, ten reruns and their GPU
    channels' teardowns, five minutes of one worker, before the family was a known hang. After
    FAMILY_HANGS of its descriptors hung, the family's other cases are recorded `crashed` without
    being sent (a failure still: a new hang fails the gate); one asked for alone is sent."""
    return (header["op_type"], tuple(t.get("data_type") for t in header["tensors"]))


def _chunks(pending: list[tuple[int, dict, list[bytes]]]):
    """Consecutive runs of at most BATCH_CASES cases and BATCH_BYTES bytes in and out (a larger
    case goes alone)."""
    chunk: list[tuple[int, dict, list[bytes]]] = []
    size = 0
    for entry in pending:
        _, header, buffers = entry
        need = sum(len(b) for b in buffers) + sum(int(t.get("total_bytes") or 0) for t in header["tensors"]
                                                  if t.get("role") == "output" and t.get("present"))
        if chunk and (len(chunk) >= BATCH_CASES or size + need > BATCH_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(entry)
        size += need
    if chunk:
        yield chunk

if sys.platform == "win32":  # pragma: no cover - the native route
    STACK_DIR.mkdir(parents=True, exist_ok=True)
