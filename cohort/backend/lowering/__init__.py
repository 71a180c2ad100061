"""The lowering of a specialised kernel to LLVM IR, one for every width
(`whole` is width 1, packets width W): see core.py."""
from .core import Lowering

__all__ = ["Lowering"]
