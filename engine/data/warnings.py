"""The dataset check's warnings (and a refusal that reads as one), each built from one template with its values in
braces.

The engine writes English (the CLI and train.log stay English); the studio reads a warning back into its
template and values (studio.i18n.problems.translate_warning) and says it again in the page's language. A
leaf module: pipeline, prompts and formats import it.
"""

from __future__ import annotations

# {label} is "" for training rows and EVAL_LABEL for the eval file's.
EVAL_LABEL = "eval "
WARNINGS = {
    "rows_too_long": "{count} of {total} {label}rows are longer than max_length {max_length} tokens and will be "
    "truncated",
    "rows_dropped": "{count} of {total} {label}rows have no tokens to learn from after truncation to max_length "
    "{max_length} (the prompt fills it) and are dropped",
    "prompts_too_long": "{count} of {total} {label}prompts are longer than max_length {max_length} tokens and are "
    "dropped",
    "no_user_turn": "{count} of {total} {label}rows have no user turn to answer",
    "no_end_of_turn": "the chat template adds nothing after an assistant's answer (no end-of-turn or eos token), so "
    "the model cannot learn where to stop; set data.chat_template to one that closes each turn",
    "tool_rows_cut": "only {whole} of {count} {label}rows with tool calls fit whole in max_length {max_length} "
    "tokens; the others are cut short or dropped, so fewer tool calls train",
    "tool_rows_none": "none of the {count} rows with tool calls fits whole in max_length {max_length} tokens, so the "
    "run would learn no tool call; raise train.max_length (or use a model with a longer context)",
    "vision_rows_dropped": "{count} of {total} {label}rows are dropped: max_length {max_length} would cut their image "
    "tokens or leave them no answer token to learn from",
    "placeholders": "{count} rows contain placeholders with no value ({names}); they are trained as written. Set "
    "data.placeholders ({example}) to fill them in",
}
# A warning about another file than the training data starts with what it is about and ": " (an eval file, one
# dataset of a list); the rest is a warning above.
EVAL_FILE_PREFIX = "eval file"


def warning(kind: str, **values: object) -> str:
    """The warning ``kind`` of WARNINGS with ``values`` filled in."""
    return WARNINGS[kind].format(**values)
