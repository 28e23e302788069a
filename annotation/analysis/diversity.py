"""Question diversity: how far the questions cluster into a few templates (method, section 6).

Each question is reduced to its *skeleton*: lower case, with the words tied to its own entity
(`<entity>`), to its domain (`<domain>`: content words that concentrate in one domain of the
corpus), names of other things (capitalised words inside the sentence: `<name>`) and numbers
(`<num>`) abstracted away, so "What is this Falcon 9 and how does it land?" and "What is this
Ducati and how does it brake?" keep only what they share. The skeletons are clustered on word and
character n-grams (TF-IDF, cosine, average linkage with a distance threshold): a cluster is a
template. No model is downloaded; scikit-learn and scipy do the work. At full size (thousands of
distinct skeletons) the matrix stays sparse, each text brings at most MAX_TOKENS words and
MAX_CHARS characters, and the linkage runs on each group of skeletons linked by neighbours
within the threshold (`cluster`): the same clusters as over all pairs, without all pairs.

Pure Python (no Django): `analyse(questions)` in, a `DiversityReport` out.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

# Words that make up a template rather than a topic: question words, auxiliaries, pronouns,
# articles, prepositions, conjunctions. Everything else is a content word that may be
# abstracted when it is tied to the entity or the domain.
_FUNCTION_WORDS = """
    a an the this that these those it its it's they their them there here what what's which who
    whom whose why how when where whether is are was were be been being am do does did done can
    could would should will shall may might must has have had having of in on at to for from with
    without by about as into onto over under than then so if any some such and or but not no nor
    i me my you your we our us he she his her him one ones each every other another more most
    less least very much many also just only own same both either neither all
"""
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS.split())

DISTANCE_THRESHOLD = 0.55  # cosine distance at which two skeletons stop being one template
DOMAIN_TIED_SHARE = 0.75  # a content word is tied to a domain when this share of it falls there
DOMAIN_TIED_MIN_COUNT = 3
# What one text contributes: a question's skeleton is a sentence or two; longer texts (a paste,
# junk from an import) are cut to this many words and characters before their n-grams count.
MAX_TOKENS = 60
MAX_CHARS = 400
BLOCK_ROWS = 256  # rows of a group multiplied at once for its distances
WORKING_MEMORY_MB = 64  # scikit-learn's chunking of the neighbour search
SIZE_BINS = ((1, 1), (2, 2), (3, 5), (6, 10), (11, 20), (21, 50), (51, None))

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")


@dataclass(frozen=True)
class Question:
    key: str  # a source id or a candidate id: what a person can look up
    text: str
    entity: str
    domain: str


@dataclass
class Template:
    rank: int
    size: int
    share: float
    skeleton: str  # the most common skeleton of the cluster
    examples: list[Question]
    domains: dict[str, int]


@dataclass
class Figures:
    """The diversity of one set of questions (all of them, or one domain's)."""

    questions: int
    templates: int
    top5_share: float | None
    top20_share: float | None
    opening_trigrams: int
    entropy_bits: float | None
    normalized_entropy: float | None  # entropy / log2(questions): 1 when every one is unique


@dataclass
class DiversityReport:
    overall: Figures
    domains: dict[str, Figures]
    templates: list[Template]  # largest first
    size_distribution: list[tuple[str, int]]  # ("3-5", number of templates of that size)
    labels: list[int] = field(default_factory=list)  # the template of each question, in order


def tokens(text: str) -> list[str]:
    return _WORD.findall(text)


def opening_trigram(text: str) -> str:
    return " ".join(word.lower() for word in tokens(text)[:3])


def domain_tied_words(questions: Sequence[Question]) -> frozenset[str]:
    """Content words whose occurrences concentrate in one domain of the corpus ("dish" in food,
    "engine" in vehicles). Needs at least two domains to say anything."""
    per_domain: dict[str, Counter] = defaultdict(Counter)
    for question in questions:
        words = {w.lower() for w in tokens(question.text)} - FUNCTION_WORDS
        per_domain[question.domain].update(words)
    if len(per_domain) < 2:
        return frozenset()
    total: Counter = Counter()
    for counts in per_domain.values():
        total.update(counts)
    tied = set()
    for word, count in total.items():
        if count < DOMAIN_TIED_MIN_COUNT:
            continue
        top = max(counts[word] for counts in per_domain.values())
        if top / count >= DOMAIN_TIED_SHARE:
            tied.add(word)
    # The domain's own name ("vehicles" -> "vehicle", "vehicles") is always tied to it.
    for domain in per_domain:
        for word in tokens(domain.replace("_", " ")):
            tied.add(word.lower())
            tied.add(word.lower().rstrip("s"))
    return frozenset(tied - FUNCTION_WORDS)


def skeleton(question: Question, domain_words: frozenset[str] = frozenset()) -> str:
    entity_words = {w.lower() for w in tokens(question.entity)} - FUNCTION_WORDS
    out: list[str] = []
    for position, word in enumerate(tokens(question.text)):
        lower = word.lower()
        if lower in entity_words or lower.rstrip("s") in entity_words:
            token = "<entity>"
        elif any(ch.isdigit() for ch in word):
            token = "<num>"
        elif lower in FUNCTION_WORDS:
            token = lower
        elif lower in domain_words or lower.rstrip("s") in domain_words:
            token = "<domain>"
        elif position > 0 and word[0].isupper():
            token = "<name>"
        else:
            token = lower
        if token.startswith("<") and out and out[-1] == token:
            continue  # "Falcon 9 rocket" is one <entity>, not three
        out.append(token)
    return " ".join(out)


def capped(skeleton_text: str) -> str:
    """What one skeleton contributes to the clustering: its first MAX_TOKENS words, at most
    MAX_CHARS characters. A question is a sentence or two; a 2,000-character paste would
    otherwise bring thousands of n-grams of its own into every product."""
    return " ".join(skeleton_text.split(" ")[:MAX_TOKENS])[:MAX_CHARS]


def vectors(skeletons: Sequence[str]):
    """The skeletons as L2-normalised TF-IDF rows of word 1-3-grams and character 3-5-grams:
    a sparse matrix (CSR), never a dense one."""
    from scipy.sparse import hstack
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import normalize

    texts = [capped(s) for s in skeletons]
    words = TfidfVectorizer(analyzer="word", ngram_range=(1, 3), token_pattern=r"[^ ]+")
    chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5))
    return normalize(hstack([words.fit_transform(texts), chars.fit_transform(texts)]).tocsr())


def _condensed_distances(matrix) -> np.ndarray:
    """The cosine distances between the rows of one group, as scipy's condensed vector
    (upper triangle, row by row), from sparse products of BLOCK_ROWS rows at a time."""
    m = matrix.shape[0]
    out = np.empty(m * (m - 1) // 2)
    position = 0
    for start in range(0, m, BLOCK_ROWS):
        block = (matrix[start : start + BLOCK_ROWS] @ matrix.T).toarray()
        for offset, row in enumerate(block):
            tail = row[start + offset + 1 :]
            out[position : position + len(tail)] = 1.0 - tail
            position += len(tail)
    np.clip(out, 0.0, 2.0, out=out)
    return out


def cluster(skeletons: Sequence[str], threshold: float = DISTANCE_THRESHOLD) -> list[int]:
    """A template label per skeleton: average linkage on the cosine distance of their n-grams,
    cut at `threshold`. Identical skeletons are clustered once.

    Average linkage never joins two groups whose every pair is at `threshold` or more (their
    average would be too), so the clusters lie inside the connected parts of the graph that
    links each skeleton to its neighbours within `threshold` (scikit-learn's radius
    neighbours on the sparse rows, computed in bounded chunks). Each part is clustered on its
    own, exactly as the whole would be: memory grows with the largest part, not with the
    square of all skeletons."""
    if not skeletons:
        return []
    distinct = sorted(set(skeletons))
    if len(distinct) == 1:
        return [0] * len(skeletons)
    import sklearn
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.sparse.csgraph import connected_components
    from sklearn.neighbors import radius_neighbors_graph

    matrix = vectors(distinct)
    with sklearn.config_context(working_memory=WORKING_MEMORY_MB):
        graph = radius_neighbors_graph(matrix, threshold, metric="cosine", mode="connectivity")
    parts, part_of = connected_components(graph, directed=False)
    labels = np.empty(len(distinct), dtype=np.int64)
    members = [[] for _ in range(parts)]
    for index, part in enumerate(part_of):
        members[part].append(index)
    next_label = 0
    # Just under the threshold: scikit-learn's cut kept merges strictly below it, fcluster's
    # keeps those at or below.
    cut = float(np.nextafter(threshold, 0.0))
    for indices in members:
        if len(indices) == 1:
            labels[indices[0]] = next_label
            next_label += 1
            continue
        tree = linkage(_condensed_distances(matrix[indices]), method="average")
        local = fcluster(tree, t=cut, criterion="distance")
        # Labels in the order of first appearance, so the result does not depend on scipy's.
        order: dict[int, int] = {}
        for index, label in zip(indices, local, strict=True):
            if label not in order:
                order[label] = next_label
                next_label += 1
            labels[index] = order[label]
    by_skeleton = dict(zip(distinct, labels.tolist(), strict=True))
    return [by_skeleton[s] for s in skeletons]


def _figures(questions: Sequence[Question], labels: Sequence[int]) -> Figures:
    n = len(questions)
    sizes = sorted(Counter(labels).values(), reverse=True)
    entropy = None
    normalized = None
    if n:
        # 0.0 - ...: a single template's entropy is 0, not -0.0 (printed "-0.00").
        entropy = 0.0 - sum((s / n) * math.log2(s / n) for s in sizes)
        normalized = entropy / math.log2(n) if n > 1 else None
    return Figures(
        questions=n,
        templates=len(sizes),
        top5_share=sum(sizes[:5]) / n if n else None,
        top20_share=sum(sizes[:20]) / n if n else None,
        opening_trigrams=len({opening_trigram(q.text) for q in questions}),
        entropy_bits=entropy,
        normalized_entropy=normalized,
    )


def figures_of(questions: Sequence[Question], labels: Sequence[int]) -> Figures:
    """The figures of a subset of analysed questions, with their labels from `analyse` (so that
    subsets are measured on the same templates)."""
    return _figures(questions, labels)


def _size_bin(size: int) -> str:
    for low, high in SIZE_BINS:
        if size >= low and (high is None or size <= high):
            if high is None:
                return f"{low}+"
            return str(low) if low == high else f"{low}-{high}"
    raise AssertionError(size)


def analyse(
    questions: Sequence[Question],
    *,
    top: int = 20,
    examples: int = 3,
    threshold: float = DISTANCE_THRESHOLD,
) -> DiversityReport:
    domain_words = domain_tied_words(questions)
    skeletons = [skeleton(q, domain_words) for q in questions]
    labels = cluster(skeletons, threshold)
    members: dict[int, list[int]] = defaultdict(list)
    for index, label in enumerate(labels):
        members[label].append(index)
    # Largest first; ties by the first question's position so the order is deterministic.
    ordered = sorted(members.values(), key=lambda m: (-len(m), m[0]))
    n = len(questions)
    templates = []
    for rank, indices in enumerate(ordered[:top], start=1):
        common = Counter(skeletons[i] for i in indices).most_common()
        templates.append(
            Template(
                rank=rank,
                size=len(indices),
                share=len(indices) / n,
                skeleton=min(common, key=lambda pair: (-pair[1], pair[0]))[0],
                examples=[questions[i] for i in indices[:examples]],
                domains=dict(Counter(questions[i].domain for i in indices).most_common()),
            )
        )
    by_domain: dict[str, list[int]] = defaultdict(list)
    for index, question in enumerate(questions):
        by_domain[question.domain].append(index)
    bins = Counter(_size_bin(len(m)) for m in ordered)
    return DiversityReport(
        overall=_figures(questions, labels),
        domains={
            domain: _figures([questions[i] for i in idx], [labels[i] for i in idx])
            for domain, idx in sorted(by_domain.items())
        },
        templates=templates,
        size_distribution=[(label, bins.get(label, 0)) for label in _bin_labels()],
        labels=list(labels),
    )


def _bin_labels() -> list[str]:
    return [_size_bin(low) for low, _ in SIZE_BINS]


def adjusted_rand(truth: Sequence[int], found: Sequence[int]) -> float:
    """How well found templates match known ones (1 identical, about 0 by chance); for tests and
    the benchmark of the clustering on generated questions."""
    from sklearn.metrics import adjusted_rand_score

    return float(adjusted_rand_score(np.asarray(truth), np.asarray(found)))
