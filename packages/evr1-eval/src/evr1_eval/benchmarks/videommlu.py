"""Video-MMLU (2025): 1,065 lecture videos; captioning and QA scored by an LLM judge (VLMEvalKit). Every row needs a
judge: EasyVideoR1 ships the captions (with an empty `problem`; the prompt becomes "Describe the video in detail.")
but cannot score them (reward 0); here they stay pending instead.
"""

from evr1_eval.api.base import Benchmark
from evr1_eval.api.registry import register

BENCHMARK = register(
    Benchmark(
        name="videommlu",
        title="Video-MMLU",
        problem_types=("open_ended",),
        id_fields=("question_id", "video_id", "id"),
        judged_types=frozenset({"open_ended"}),
        default_question="Describe the video in detail.",
    )
)
