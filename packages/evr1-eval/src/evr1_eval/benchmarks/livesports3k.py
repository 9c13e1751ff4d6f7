"""LiveSports-3K QA track (LiveCC, CVPR'25): MC-4 on sports clips (cut with ffmpeg first); accuracy with What/Who/When
and OCR breakdowns; evr1-rewards letter extraction.
"""

from evr1_eval.api.base import Benchmark
from evr1_eval.api.registry import register

BENCHMARK = register(
    Benchmark(
        name="livesports3k",
        title="LiveSports-3K QA",
        problem_types=("multiple_choice",),
        group_fields={"q_type": ("q_type_livesports", "q_type"), "ocr": ("ocr_livesports", "ocr")},
        aliases=("livesports3k_qa",),
    )
)
