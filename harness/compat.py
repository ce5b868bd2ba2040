"""The one place where TileLang API differences between releases live."""
from contextlib import contextmanager

import tilelang
import tilelang.language as T

VERSION = tilelang.__version__

# T.Tensor is the annotation in current releases; very old ones only had T.Buffer.
Tensor = getattr(T, "Tensor", None) or T.Buffer


# The harness's compile knobs (harness.case.KNOBS) -> the PassConfigKey member that sets each.
KNOBS = {"fast_math": "TL_ENABLE_FAST_MATH", "no_safe_memory": "TL_DISABLE_SAFE_MEMORY_ACCESS",
         "no_smem_reuse": "TL_DISABLE_SHARED_MEMORY_REUSE",
         "no_tma": "TL_DISABLE_TMA_LOWER", "no_vectorize_256": "TL_DISABLE_VECTORIZE_256",
         "no_warp_specialize": "TL_DISABLE_WARP_SPECIALIZED", "no_wgmma": "TL_DISABLE_WGMMA"}


def _pass_config_key():
    transform = getattr(tilelang, "transform", None)
    return getattr(transform, "PassConfigKey", None)


def missing_knobs(knobs) -> str | None:
    """Why this release cannot set `knobs`, or None."""
    keys = _pass_config_key()
    missing = [KNOBS[k] for k in knobs if keys is None or not hasattr(keys, KNOBS[k])]
    return f"tilelang {VERSION} has no pass config {', '.join(missing)}" if missing else None


def missing_language(names) -> str | None:
    """Why this release cannot build kernels written with T.<name> for each of `names`, or None."""
    missing = [name for name in names if not hasattr(T, name)]
    return f"tilelang {VERSION} has no {', '.join('T.' + n for n in missing)}" if missing else None


def example_program(builder, *args, **kwargs):
    """The prim_func an example's builder (`@tilelang.jit`, under `@autotune` or not) makes for these
    arguments, and the pass configs its decorator sets. Built this way, nothing is tuned or run."""
    impl = getattr(builder, "jit_impl", builder)
    if hasattr(impl, "get_tir"):
        return impl.get_tir(*args, **kwargs), dict(impl.pass_configs or {})
    # Before 0.1.7 `@tilelang.jit` (and `@autotune` above it) was a functools wrapper that compiles
    # when called: the function it wraps returns the prim_func, and the innermost wrapper's closure
    # holds the jit settings (out_idx, pass_configs). Anything else is called as it is: a plain
    # function returning its prim_func (a user's file).
    wrapper, func = None, builder
    while hasattr(func, "__wrapped__"):
        wrapper, func = func, func.__wrapped__
    for cell in getattr(wrapper, "__closure__", None) or ():
        try:
            jit = cell.cell_contents
        except ValueError:  # a cell not yet filled
            continue
        if hasattr(jit, "out_idx") and hasattr(jit, "pass_configs"):
            return func(*args, **kwargs), dict(jit.pass_configs or {})
    return builder(*args, **kwargs), {}


def compile(func, target, knobs=(), kernel=None, pass_configs=None):
    """Compile a prim_func. `target` is "auto" (the local GPU) or an arch such as "sm_90a";
    `knobs` switch pass configurations (none: the release's defaults, passed as nothing at all), on
    top of `pass_configs` (an outside kernel's own).
    An exception names `kernel` (its `kernel` attribute), so that a compile error is pinned on
    the kernel that raised it, as a launch error is.

    An explicit arch goes in as a TVM Target object: current releases reject the string form
    ("cuda -arch=sm_90a") and older ones (0.1.8) the dict form.
    """
    configs = {**(pass_configs or {}), **{getattr(_pass_config_key(), KNOBS[k]): True for k in knobs}}
    extra = {"pass_configs": configs} if configs else {}
    try:
        if target == "auto":
            return tilelang.compile(func, target="auto", **extra)
        import tvm
        return tilelang.compile(func, target=tvm.target.Target({"kind": "cuda", "arch": target}), **extra)
    except Exception as e:
        if kernel is not None:
            try:
                e.kernel = kernel
            except AttributeError:  # an exception type without a __dict__: left unpinned
                pass
        raise


def kernel_sources(kernel) -> list[str]:
    """The generated CUDA source of each compiled kernel (a family's build may give a tuple, or a
    dict by kernel name)."""
    if isinstance(kernel, dict):
        return kernel_sources(list(kernel.values()))
    if isinstance(kernel, (tuple, list)):
        return [source for k in kernel for source in kernel_sources(k)]
    return [kernel.get_kernel_source()]


@contextmanager
def observing_passes(before, after):
    """Every TVM PassContext opened inside (TileLang opens its own per compile) also calls
    before(module, pass name) and after(module, pass name) around each pass: TVM's PassInstrument,
    added by wrapping PassContext's constructor, so it works whichever way a release opens it."""
    import tvm

    @tvm.instrument.pass_instrument
    class Observer:
        def run_before_pass(self, mod, info):
            before(mod, info.name)

        def run_after_pass(self, mod, info):
            after(mod, info.name)

    original = tvm.transform.PassContext.__init__

    def observed(self, *args, **kwargs):
        kwargs.update(zip(("opt_level", "required_pass", "disabled_pass", "instruments"), args))
        kwargs["instruments"] = [*(kwargs.get("instruments") or []), Observer()]
        original(self, **kwargs)

    # A kernel loaded from TileLang's cache runs no pass: compile afresh while observing.
    import tilelang
    cached = getattr(getattr(tilelang, "env", None), "is_cache_enabled", lambda: False)()
    if cached:
        tilelang.disable_cache()
    tvm.transform.PassContext.__init__ = observed
    try:
        yield
    finally:
        tvm.transform.PassContext.__init__ = original
        if cached:
            tilelang.enable_cache()
