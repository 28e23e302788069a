"""`make run`'s banner: plain words in a terminal (no Markdown stars, roles as the pages say
them), and the stages that use the offline demo provider say "demo"."""

from __future__ import annotations

from gamut_site.devrun import banner, demo_stage_models


def test_the_banner_names_roles_in_words_without_markup():
    text = banner(demo_stage_models({}))
    assert "**" not in text
    assert "rubric_reviser" not in text
    assert "dave    dave-demo-pass     rubric reviser" in text
    assert "the offline demo provider" in text
    assert "Demo logins" in text
