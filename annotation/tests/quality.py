"""Helpers of the training and audit tests: the rates of the one QualityConfig row, and a gold
item made as an admin makes one."""

from annotation.models import QualityConfig
from annotation.training import gold

GOLD_NOTE = "It names the dish: leading."


def set_rates(**values) -> None:
    """gold_rate, training_pass_share, review_audit_rate, round_audit_rate: saved at once."""
    config = QualityConfig.current()
    for name, value in values.items():
        setattr(config, name, value)
    config.save()


def make_gold(root, image, *, text="Gold: what is this dish?", decision="discard", **fields):
    return gold.gold_item_create(
        user=root,
        image_id=image.pk,
        text=text,
        decision=decision,
        note=fields.pop("note", GOLD_NOTE),
        **fields,
    )


def draw(user, item) -> None:
    """Draw the gold item into the person's queue, as the review page does (only a gold item
    drawn for a person may be answered by them)."""
    from annotation.review import services

    claimed = services.review_claim(user=user)
    assert claimed is not None and claimed.candidate.pk == item.candidate_id, claimed
