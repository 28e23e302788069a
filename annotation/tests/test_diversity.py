"""Question diversity: skeletons, templates found again on generated questions, the figures by
hand, and the page, the API and the command that show them."""

from __future__ import annotations

import io
import json
import math

import pytest
from django.core.cache import cache
from django.core.management import call_command

from annotation.analysis import diversity
from annotation.analysis import diversity_report as diversity_report_module
from annotation.analysis.diversity import Question, analyse, skeleton
from annotation.analysis.diversity_report import diversity_report
from annotation.models import AuditEvent, FinalQuestion
from llm.models import Job
from tests.question_sets import generated_questions


def q(text: str, entity: str = "Falcon 9", domain: str = "vehicles", key: str = "k") -> Question:
    return Question(key=key, text=text, entity=entity, domain=domain)


def test_the_skeleton_abstracts_the_entity_names_numbers_and_domain_words():
    question = q("What is this Falcon 9 rocket, and how did SpaceX land it in 2015?")
    assert skeleton(question, frozenset({"rocket"})) == (
        "what is this <entity> <domain> and how did <name> land it in <num>"
    )
    # Two questions of one template on different entities share the skeleton.
    a = q("What is this Ducati, and why is its engine loud?", entity="Ducati Monster")
    b = q("What is this Vespa, and why is its engine loud?", entity="Vespa")
    assert skeleton(a) == skeleton(b) == "what is this <entity> and why is its engine loud"


def test_domain_tied_words_are_content_words_concentrated_in_one_domain():
    questions = [q(f"How is this dish {n} made?", domain="food") for n in range(3)] + [
        q("How is this engine made?", domain="vehicles"),
        q("How is this flower made?", domain="plants"),
    ]
    tied = diversity.domain_tied_words(questions)
    assert "dish" in tied  # 3 of 3 in food
    assert "made" not in tied  # spread over three domains
    assert "how" not in tied  # a function word, never abstracted
    assert {"food", "vehicles", "vehicle", "plants", "plant"} <= tied  # the domains' own names
    assert diversity.domain_tied_words(questions[:3]) == frozenset()  # one domain says nothing


def test_figures_by_hand():
    # Templates of sizes 2, 1, 1: entropy = -(1/2 log 1/2 + 2 * 1/4 log 1/4) = 1.5 bits.
    questions = [
        q("What is this Vespa, and how fast does it go?", entity="Vespa", key="a"),
        q("What is this Unimog, and how fast does it go?", entity="Unimog", key="b"),
        q("Who designed the seats, and were they comfortable for long trips?", key="c"),
        q("Where was it assembled in Europe over the decades of production?", key="d"),
    ]
    report = analyse(questions)
    assert report.overall.templates == 3
    assert report.overall.questions == 4
    assert report.overall.top5_share == 1.0
    assert report.overall.entropy_bits == pytest.approx(1.5)
    assert report.overall.normalized_entropy == pytest.approx(1.5 / math.log2(4))
    assert report.overall.opening_trigrams == 3  # "what is this" twice
    assert report.templates[0].size == 2
    assert [e.key for e in report.templates[0].examples] == ["a", "b"]
    assert report.labels[0] == report.labels[1] != report.labels[2]
    assert dict(report.size_distribution)["1"] == 2
    assert dict(report.size_distribution)["2"] == 1


def test_the_templates_of_generated_questions_are_found_again():
    questions, truth = generated_questions(600, templates=12, seed=3)
    report = analyse(questions)
    assert report.overall.templates == 12
    assert diversity.adjusted_rand(truth, report.labels) > 0.95
    # Fewer templates in the same number of questions: less diverse on every figure.
    fewer, _ = generated_questions(600, templates=4, seed=3)
    low = analyse(fewer).overall
    assert low.templates == 4
    assert low.entropy_bits < report.overall.entropy_bits
    assert low.top5_share == 1.0 > report.overall.top5_share
    assert set(report.domains) == {q.domain for q in questions}
    assert sum(f.questions for f in report.domains.values()) == 600


def test_analyse_is_deterministic_and_copes_with_nothing_and_one():
    questions, _ = generated_questions(120, templates=6, seed=5)
    assert analyse(questions).labels == analyse(list(questions)).labels
    empty = analyse([])
    assert empty.overall.templates == 0 and empty.overall.entropy_bits is None
    one = analyse([q("What is this?")])
    assert one.overall.templates == 1 and one.overall.normalized_entropy is None
    assert f"{one.overall.entropy_bits:.2f}" == "0.00"  # not "-0.00"


# --- the command (the page and the API: test_diversity_job.py) --------------------------------


@pytest.fixture
def questions(make_image, root):
    cache.clear()
    texts = [
        ("d-1", "Vespa", "What is this Vespa, and how fast does it go?"),
        ("d-2", "Unimog", "What is this Unimog, and how fast does it go?"),
        ("d-3", "Ramen", "Who invented the broth <script>, and where did it spread?"),
    ]
    for source_id, entity, text in texts:
        image, (candidate,) = make_image(source_id, [text], entity=entity)
        FinalQuestion.objects.create(image=image, candidate=candidate, text=text, method="manual")
    return texts


def test_the_command_prints_the_figures_and_json(questions):
    out = io.StringIO()
    call_command("question_diversity", "--scope", "final", stdout=out)
    text = out.getvalue()
    assert "== final questions" in text
    assert "what is this <entity> and how fast does it go" in text
    out = io.StringIO()
    call_command("question_diversity", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["candidates"]["overall"]["questions"] == 3


# --- per guard prompt version ----------------------------------------------------------------


@pytest.fixture
def guarded(make_image, root):
    """Final questions chosen by guard jobs of prompt v1 and v2, and one promoted by an admin."""
    cache.clear()
    versions = {
        n: Job.objects.create(kind="annotation.guard", params={"prompt_version": n}) for n in (1, 2)
    }
    texts = [
        ("g-1", "Vespa", "What is this Vespa, and how fast does it go?", 1),
        ("g-2", "Unimog", "What is this Unimog, and how fast does it go?", 1),
        ("g-3", "Ramen", "Who invented this broth, and where did it spread?", 2),
        ("g-4", "Tagine", "Which spices go into this stew, and why those?", 2),
        ("g-5", "Ducati", "What is this Ducati, and how fast does it go?", None),
    ]
    for source_id, entity, text, version in texts:
        image, (candidate,) = make_image(source_id, [text], entity=entity)
        FinalQuestion.objects.create(
            image=image, candidate=candidate, text=text, method="guard" if version else "manual"
        )
        if version:
            AuditEvent.objects.create(
                action="llm.guard",
                image=image,
                data={
                    "job": versions[version].pk,
                    "item": source_id,
                    "result": {"selected": candidate.pk},
                },
            )
    return texts


def test_the_figures_per_guard_prompt_are_measured_on_the_same_templates(
    guarded, django_assert_num_queries
):
    report = diversity_report("final")
    rows = {row["guard_prompt"]: row for row in report["guard_prompts"]}
    assert set(rows) == {"guard v1", "guard v2", "promoted by an admin"}
    # v1's two questions share one template; v2's two are two templates.
    assert (rows["guard v1"]["questions"], rows["guard v1"]["templates"]) == (2, 1)
    assert (rows["guard v2"]["questions"], rows["guard v2"]["templates"]) == (2, 2)
    assert rows["guard v1"]["entropy_bits"] == 0 < rows["guard v2"]["entropy_bits"]
    # The admin's question is in v1's template: one template over all, counted in both.
    assert report["overall"]["templates"] == 3
    assert diversity_report("candidates")["guard_prompts"] == []

    # What the report is computed from: the final questions, the guard's events, their jobs.
    with django_assert_num_queries(3):
        diversity_report_gathered = diversity_report_module.gather("final")
    assert len(diversity_report_gathered[0]) == 5
    out = io.StringIO()
    call_command("question_diversity", "--scope", "final", stdout=out)
    assert "guard v2: 2 question(s), 2 template(s)" in out.getvalue()


# --- at full size: sparse, by parts, a cap on what one text brings ---------------------------


def test_clustering_by_parts_finds_what_average_linkage_on_all_pairs_finds():
    """The clusters are those of scikit-learn's average linkage over every pair (the dense
    matrix the analysis used to build), on questions that do not collapse into few skeletons."""
    from sklearn.cluster import AgglomerativeClustering

    from tests.question_sets import varied_questions

    questions, _ = varied_questions(400, seed=2)
    words = diversity.domain_tied_words(questions)
    skeletons = sorted({skeleton(question, words) for question in questions})
    assert len(skeletons) > 350  # they do not collapse
    dense = AgglomerativeClustering(
        n_clusters=None,
        metric="cosine",
        linkage="average",
        distance_threshold=diversity.DISTANCE_THRESHOLD,
    ).fit_predict(diversity.vectors(skeletons).toarray())
    found = diversity.cluster(skeletons)
    assert diversity.adjusted_rand(dense, found) == 1.0
    assert 30 < len(set(found)) < len(skeletons)


def test_a_long_text_brings_no_more_than_the_cap_and_the_matrix_stays_sparse():
    from scipy.sparse import issparse

    junk = " ".join(f"w{n}x{n * 7 % 13}" for n in range(400))  # about 3,000 characters
    assert len(junk) > 2000
    matrix = diversity.vectors([junk, "what is this <entity>", "how old is this <entity>"])
    assert issparse(matrix)
    capped = diversity.capped(junk)
    assert len(capped) <= diversity.MAX_CHARS
    assert len(capped.split(" ")) <= diversity.MAX_TOKENS
    # Its row holds the n-grams of the capped text only: at most (words x 3) + (chars x 3).
    assert matrix[0].nnz <= 3 * diversity.MAX_TOKENS + 3 * diversity.MAX_CHARS
    assert matrix[0].nnz == diversity.vectors([capped, "x y"])[0].nnz
    # Fifty such texts among questions: the same once cut (their numbers come after the cap),
    # so one template, and the questions' own template is found beside it.
    questions = [q(f"{junk} {n}", entity="Junk", key=f"j{n}") for n in range(50)]
    questions += [
        q(f"What is this Vespa {n}, and how fast does it go?", entity="Vespa", key=f"v{n}")
        for n in range(5)
    ]
    report = analyse(questions)
    assert [t.size for t in report.templates] == [50, 5]
