"""sublet: a caching GPU allocator with PyTorch's native policy.

Submodules (imported on demand, so that ``import sublet`` never needs
PyTorch or a GPU):

    sublet.torch   make sublet PyTorch's CUDA allocator (install()) and read
                   its statistics, summary and snapshots from Python.
"""

__all__ = ["torch"]
__version__ = "0.1.0"
