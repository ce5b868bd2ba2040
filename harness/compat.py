"""The one place where TileLang API differences between releases live."""
import tilelang
import tilelang.language as T

VERSION = tilelang.__version__

# T.Tensor is the annotation in current releases; very old ones only had T.Buffer.
Tensor = getattr(T, "Tensor", None) or T.Buffer


def compile(func, target):
    """Compile a prim_func. `target` is "auto" (the local GPU) or an arch such as "sm_90a".

    An explicit arch goes in as a TVM Target object: current releases reject the string form
    ("cuda -arch=sm_90a") and older ones (0.1.8) the dict form.
    """
    if target == "auto":
        return tilelang.compile(func, target="auto")
    import tvm
    return tilelang.compile(func, target=tvm.target.Target({"kind": "cuda", "arch": target}))


def kernel_source(kernel) -> str:
    """The generated CUDA source of a compiled kernel (or of the first of a tuple of kernels)."""
    if isinstance(kernel, (tuple, list)):
        return "\n".join(kernel_source(k) for k in kernel)
    return kernel.get_kernel_source()
