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


# --- Varied questions: many entities, verbs and shapes, so that they do not collapse ----------
# Each shape is a template: its fixed words stay, its slots take one of many words, so nearly
# every question has a skeleton of its own while the shape it was written from is known.
# {d} subject (the entity or a domain word), {v} a verb, {a} an attribute, {q} a qualifier,
# {r} a related name, {p} a group of people.
def _words(text: str) -> list[str]:
    return text.split()


VERBS = _words("""
    build repair clean store cook carry paint polish sharpen season grow prune water harvest
    transport ship sell price rent borrow inspect certify insure photograph display exhibit
    restore preserve decorate wrap package label recycle dispose assemble disassemble test
    measure weigh calibrate tune play train feed groom breed tame protect guard defend cross
    climb ride drive fly sail steer launch land park wash dry iron fold sew knit weave dye
    stitch bake roast grill fry boil steam smoke ferment pickle brew serve pour taste judge
    rate review translate publish print bind illustrate edit narrate adapt film stage perform
    celebrate honour name design sketch model sculpt carve mould cast forge weld glue mount
    frame hang light heat cool freeze thaw import export license patent copy imitate counterfeit
""")
ATTRIBUTES = _words("""
    colour weight texture smell flavour shape size height width depth age origin lifespan
    strength speed range capacity volume pitch tone finish pattern grain density hardness
    temperature humidity acidity sweetness bitterness saltiness spiciness aroma sound rhythm
    balance grip comfort fit durability reliability efficiency accuracy precision symmetry
    proportion silhouette profile outline surface lining seam hem collar sole heel handle blade
    hinge spring lever valve gear wheel axle frame roof facade tower arch dome spire nave
    courtyard garden entrance staircase basement attic chapter ending prologue epilogue cover
    spine binding margin font title dedication season harvest climate habitat diet plumage
    fur mane tail horn beak claw fin shell bark root leaf petal seed stem thorn
""")
QUALIFIERS = _words("""
    unusual traditional modern ancient rare common cheap costly famous obscure local foreign
    seasonal regional handmade industrial fragile sturdy delicate heavy light bright dark
    early late original copied official unofficial popular forgotten sacred everyday
""")
PEOPLE = _words("""
    farmers sailors monks children collectors tourists chefs tailors engineers students
    soldiers pilgrims merchants nomads craftsmen scholars athletes critics historians locals
""")
SHAPES = [
    "How do {p} usually {v} this {d}, and what tools do they need?",
    "Why would anyone {v} this {d} before the {a} is checked?",
    "What happens to the {a} of this {d} if you {v} it too often?",
    "Is it true that this {d} was first made to {v} things in {r}?",
    "Which part of this {d} decides its {a}, and can it be changed?",
    "When did {p} in {r} start to {v} this {d}?",
    "Could you {v} this {d} at home without damaging its {a}?",
    "What does the {q} {a} of this {d} tell an expert?",
    "Who taught {p} to {v} this {d} the way it is done now?",
    "Where is the best place to {v} this {d}, according to {p}?",
    "How much does it cost to {v} this {d} properly?",
    "Does the {a} of this {d} differ between {q} and {q} ones?",
    "What mistakes do beginners make when they {v} this {d}?",
    "Why is the {a} of this {d} considered {q} by {p}?",
    "In what season should {p} {v} this {d}?",
    "How long does it take to {v} this {d} from start to finish?",
    "What rules govern how {p} may {v} this {d} in {r}?",
    "Has the way people {v} this {d} changed since {r} took it up?",
    "Name three things that affect the {a} of this {d}.",
    "Should this {d} be kept away from {p} who {v} it carelessly?",
    "Which famous story involves {p} trying to {v} this {d}?",
    "Explain, step by step, how to {v} this {d} safely.",
    "What would a {q} version of this {d} look like?",
    "Among {p}, who is known for the finest {a} on this {d}?",
    "Is the {a} of this {d} measured, estimated or guessed?",
    "How did the {a} of this {d} evolve over the last century?",
    "Why do {p} prefer to {v} this {d} by hand rather than by machine?",
    "If I wanted to {v} this {d} myself, where should I begin?",
    "What evidence shows that {p} in {r} used to {v} this {d}?",
    "Can the {a} alone identify this {d} among {q} look-alikes?",
    "Which law protects the right to {v} this {d}?",
    "How many {p} does it take to {v} one such {d}?",
    "What sound, smell or sight tells you it is time to {v} this {d}?",
    "Who owns the rights to {v} and sell this {d} today?",
    "Why has this {d} become a symbol for {p} across {r}?",
    "What tradition requires that this {d} be {v}ed at dawn?",
    "Tell me the origin of the word used for this {d}'s {a}.",
    "Are there festivals where {p} {v} this {d} together?",
    "What would go wrong if the {a} of this {d} were doubled?",
    "Which museum holds the most {q} example of this {d}?",
    "Do experts agree on the best way to {v} this {d}?",
    "What does this {d} reveal about the {p} who made it?",
    "How can one tell a genuine {d} from a {q} imitation?",
    "List the steps {p} follow to {v} and then store this {d}.",
    "What is unique about the {a} that sets this {d} apart?",
    "Why did {p} stop trying to {v} this {d} for a while?",
    "Would this {d} survive if someone tried to {v} it underwater?",
    "At what age do {p} first learn to {v} this {d}?",
    "Is the {q} {a} of this {d} a sign of quality or of wear?",
    "How does the climate of {r} affect the {a} of this {d}?",
    "What tools were invented just to {v} this {d}?",
    "Which record exists for the fastest time to {v} this {d}?",
    "For what occasions do {p} traditionally {v} this {d}?",
    "How do you measure the {a} of this {d} without special equipment?",
    "What role did this {d} play in the lives of {p}?",
    "Has anyone ever tried to {v} this {d} in space?",
    "What do children find surprising about the {a} of this {d}?",
    "Which mistakes ruin the {a} of this {d} for good?",
    "How did {p} from {r} first describe this {d}?",
    "Is there a {q} way to {v} this {d} that most people ignore?",
]


def _names(rng: random.Random, count: int) -> list[str]:
    """Made-up capitalised names ("Korvana"), distinct, so entities run to the hundreds."""
    onsets = _words("b c d f g h k l m n p r s t v z br dr gr kr pl st tr")
    vowels = _words("a e i o u ai ea ou")
    names: set[str] = set()
    while len(names) < count:
        parts = rng.randint(2, 3)
        names.add("".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(parts)).title())
    return sorted(names)


def varied_questions(
    n: int = 1800,
    *,
    shapes: int = len(SHAPES),
    entities_per_domain: int = 30,
    seed: int = 11,
    skew: float = 0.8,
) -> tuple[list[Question], list[int]]:
    """n questions over the 10 domains and `entities_per_domain` made-up entities each (300 by
    default), from `shapes` question shapes whose slots take one of about 150 verbs, 150
    attributes, 30 qualifiers, 20 groups of people and 7 related names: nearly every question
    is a skeleton of its own, and the shape each came from is returned as its template."""
    rng = random.Random(seed)
    names = _names(rng, entities_per_domain * len(DOMAINS))
    domains = sorted(DOMAINS)
    entities = {
        domain: [
            *DOMAINS[domain][1],
            *names[i * entities_per_domain : (i + 1) * entities_per_domain],
        ][:entities_per_domain]
        for i, domain in enumerate(domains)
    }
    chosen = SHAPES[:shapes]
    weights = [1 / (rank + 1) ** skew for rank in range(len(chosen))]
    questions, truth = [], []
    for index in range(n):
        domain = domains[index % len(domains)]
        entity = rng.choice(entities[domain])
        template = rng.choices(range(len(chosen)), weights)[0]
        subject = entity if rng.random() < 0.5 else rng.choice(DOMAINS[domain][0])
        text = chosen[template].format(
            d=subject,
            v=rng.choice(VERBS),
            a=rng.choice(ATTRIBUTES),
            q=rng.choice(QUALIFIERS),
            p=rng.choice(PEOPLE),
            r=rng.choice(RELATED),
        )
        questions.append(Question(key=f"var-{index:05d}", text=text, entity=entity, domain=domain))
        truth.append(template)
    return questions, truth
