"""The built-in quickstart: a generated moving-shapes video/image task, a tiny random Qwen-VL, and their preparation.

Public API: QuickstartDataSpec, generate_quickstart_data, TinyVLMSpec, build_tiny_vlm, save_tiny_vlm, tiny_vlm_model,
train_tiny_tokenizer, prepare_quickstart, PreparedQuickstart. Importing this package loads no torch/transformers.
"""

from evr1_train.quickstart.dataset import QuickstartDataSpec, generate_quickstart_data
from evr1_train.quickstart.model import TinyVLMSpec, build_tiny_vlm, save_tiny_vlm, tiny_vlm_model
from evr1_train.quickstart.prepare import PreparedQuickstart, prepare_quickstart
from evr1_train.quickstart.tokenizer import train_tiny_tokenizer

__all__ = [
    "PreparedQuickstart",
    "QuickstartDataSpec",
    "TinyVLMSpec",
    "build_tiny_vlm",
    "generate_quickstart_data",
    "prepare_quickstart",
    "save_tiny_vlm",
    "tiny_vlm_model",
    "train_tiny_tokenizer",
]
