"""Generated question sets with known templates, for the diversity tests and benchmark.

`generated_questions(n, templates=k)` writes n questions over 10 everyday domains from k
templates (each filled with the question's entity and words of its domain, and sometimes a
related name), and returns them with the template each came from: what the clustering should
find again.
"""

from __future__ import annotations

import random

from annotation.analysis.diversity import Question

DOMAINS = {
    "food": (
        ["dish", "recipe", "cuisine", "sauce"],
        [
            "Coq au vin",
            "Pad thai",
            "Ramen",
            "Paella",
            "Moussaka",
            "Bibimbap",
            "Goulash",
            "Tiramisu",
            "Pho",
            "Ceviche",
        ],
    ),
    "animals": (
        ["animal", "species", "breed", "habitat"],
        [
            "Red panda",
            "Axolotl",
            "Ibex",
            "Pangolin",
            "Okapi",
            "Quokka",
            "Kakapo",
            "Narwhal",
            "Tapir",
            "Fossa",
        ],
    ),
    "plants": (
        ["plant", "flower", "garden", "soil"],
        [
            "Monstera",
            "Bonsai",
            "Lavender",
            "Saguaro",
            "Orchid",
            "Wisteria",
            "Fern",
            "Peony",
            "Agave",
            "Baobab",
        ],
    ),
    "vehicles": (
        ["car", "engine", "model", "drive"],
        [
            "Falcon 9",
            "Vespa",
            "Ducati Monster",
            "Tesla Model 3",
            "Land Rover",
            "Boeing 747",
            "Mini Cooper",
            "Fiat 500",
            "Concorde",
            "Unimog",
        ],
    ),
    "local": (
        ["building", "landmark", "city", "visitors"],
        [
            "Sagrada Familia",
            "Flatiron",
            "Ponte Vecchio",
            "Atomium",
            "Hallgrimskirkja",
            "Space Needle",
            "Alhambra",
            "Petronas Towers",
            "Chrysler Building",
            "Big Ben",
        ],
    ),
    "objects": (
        ["device", "tool", "object", "design"],
        [
            "Moka pot",
            "Rubik's cube",
            "Swiss army knife",
            "Polaroid",
            "Walkman",
            "Stanley knife",
            "Zippo",
            "Theremin",
            "Slide rule",
            "Lava lamp",
        ],
    ),
    "products": (
        ["brand", "product", "price", "market"],
        [
            "Nutella",
            "Lego",
            "Crocs",
            "Kindle",
            "AirPods",
            "Vegemite",
            "Tupperware",
            "Birkenstock",
            "Sriracha",
            "Moleskine",
        ],
    ),
    "fashion": (
        ["style", "fabric", "garment", "wear"],
        [
            "Trench coat",
            "Kimono",
            "Converse",
            "Panama hat",
            "Dirndl",
            "Harris tweed",
            "Doc Martens",
            "Sari",
            "Beret",
            "Poncho",
        ],
    ),
    "books": (
        ["book", "author", "novel", "edition"],
        [
            "Dune",
            "Ulysses",
            "Moby Dick",
            "Beloved",
            "Middlemarch",
            "Rebecca",
            "Emma",
            "Solaris",
            "Persepolis",
            "Maus",
        ],
    ),
    "sports": (
        ["game", "team", "rules", "players"],
        [
            "Curling",
            "Sepak takraw",
            "Hurling",
            "Kabaddi",
            "Pickleball",
            "Bandy",
            "Jai alai",
            "Petanque",
            "Korfball",
            "Fives",
        ],
    ),
}
RELATED = ["Japan", "Italy", "the Romans", "Victorian England", "NASA", "Mexico", "Norway"]

# {d}: a word of the domain or the entity itself; {r}: a related name.
TEMPLATES = [
    "What is this {d} called, and how is it traditionally made?",
    "What is this {d}, and what is its history?",
    "Which {d} is this, and how does it compare with others of its kind?",
    "What kind of {d} is shown here, and where does it come from?",
    "Can you identify this {d} and explain why it became popular?",
    "What is the story behind this {d}, and who created it?",
    "How is this {d} used today, and how did that change over time?",
    "What makes this {d} different from similar ones, and why does it matter?",
    "Where would I find this {d}, and what should I know before visiting or buying?",
    "What are the main features of this {d}, and how do they work together?",
    "Is this {d} connected to {r}, and how did that shape it?",
    "What do experts consider the defining traits of this {d}, and how have they evolved?",
    "Why is this {d} so expensive, and what drives its value?",
    "How do people in {r} use this {d}, and what rituals surround it?",
    "What environmental impact does this {d} have, and how is it being reduced?",
    "What was the first version of this {d} like, and what changed in later ones?",
    "Who are the best known makers of this {d}, and how do their versions differ?",
    "What safety concerns come with this {d}, and how are they addressed?",
    "How should this {d} be cared for or maintained, and what mistakes are common?",
    "What records or milestones are associated with this {d}, and when were they set?",
]


def generated_questions(
    n: int = 1800, *, templates: int = len(TEMPLATES), seed: int = 7, skew: float = 1.1
) -> tuple[list[Question], list[int]]:
    """n questions over the domains; template sizes follow a Zipf-like skew, as generated
    questions do (a few templates take most of them)."""
    rng = random.Random(seed)
    chosen = TEMPLATES[:templates]
    weights = [1 / (rank + 1) ** skew for rank in range(len(chosen))]
    questions, truth = [], []
    domains = sorted(DOMAINS)
    for index in range(n):
        domain = domains[index % len(domains)]
        words, entities = DOMAINS[domain]
        entity = rng.choice(entities)
        template = rng.choices(range(len(chosen)), weights)[0]
        # Half the questions name the entity where the others say "this dish".
        subject = entity if rng.random() < 0.5 else rng.choice(words)
        text = chosen[template].format(d=subject, r=rng.choice(RELATED))
        questions.append(Question(key=f"gen-{index:04d}", text=text, entity=entity, domain=domain))
        truth.append(template)
    return questions, truth
