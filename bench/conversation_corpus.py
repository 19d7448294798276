"""The conversations of bench/conversation.py: a generated long-conversation memory set, and a LoCoMo reader.

`generate()` writes multi-session conversations between two people (dated sessions of greetings, small talk,
call-backs and the turns where things happen: a pet adopted, a move, a new job, a trip booked with a flight number
and a confirmation code, a relative's news, …) and the questions about them, each with the dialog ids of the turns
that answer it. It is deterministic for a seed and needs no download. Four kinds of question, the same number of
each:

- single-hop: one turn answers it ("What breed is Melanie's dog?" → the turn that says "a two-year-old beagle");
- multi-hop: two or more turns, mostly in different sessions, joined by a name the question does not say ("What
  did Melanie's beagle swallow?" → the adoption turn that names the beagle and the vet turn that names it again);
- temporal: the answer is a date, said relative to the session's ("I adopted a dog last weekend");
- identifier: the question names an exact code or rare name ("Whose flight is TP 1432?", "Who is Ingrid Halvorsen?").

The answering turns often do not repeat the question's words (the breed turn does not say "dog"), and the small talk
and call-backs repeat the topic words, pet names, cities and company names in turns that answer nothing, so neither a
lexical nor a vector ranking finds the answers by a single shared word.

The generator's vocabulary and templates (names, places, breeds, greetings, small talk, a relative's news, …) are
the tables of bench/corpora/conversation_vocabulary.json; an arc's own lines stay in its function, beside the facts
and questions they answer. The corpus itself is not stored: `generate()` makes it, for any seed, in a tenth of a
second.

`read_chinese()` reads the stored conversations of bench/corpora/conversation_zh_*.jsonl, written for ovsite: three
long conversations mostly in Chinese (two friends; an engineer and a code-switched AI assistant; a personal
assistant), with questions in Chinese, English and code-switched, among them changed-fact questions (a fact stated
early and changed later, the question asking its current value; `stale` names the superseded turns).
`validate_chinese(corpus)` checks them.

`read_locomo(path)` reads the public LoCoMo set (snap-research/locomo, CC BY-NC 4.0: never commit it): its
`locomo10.json`, or the repository's `data/locomo10.zip` (the same ten conversations, one file each). Categories are
mapped as the published evaluations do (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop); category 5
(adversarial: no answer in the conversation) is skipped. A turn is its text as said: the machine captions of shared
photos (`blip_caption`) are left out. So read, vector-only /find@10 gives issue 28's figure (0.34); with the captions
appended it lost 3 points and BM25 moved by less than one.
"""

import datetime as dt
import itertools
import json
import random
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from bench.harness import corpus_records

SEED = 20260528
KINDS = ("single-hop", "multi-hop", "temporal", "identifier")
LOCOMO_KINDS = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
CHINESE_KINDS = ("single-hop", "multi-hop", "temporal", "changed-fact")
LANGUAGES = ("zh", "en", "mixed")  # a question's: Chinese, English, code-switched


@dataclass(frozen=True)
class Turn:
    conv: str
    dia_id: str  # "D<session>:<turn>", LoCoMo's form
    speaker: str
    date: dt.date
    text: str

    @property
    def content(self) -> str:
        """The memory as stored: the session's date and the speaker in front, as a chat log would show them."""
        return f"[{self.date.isoformat()}] {self.speaker}: {self.text}"


@dataclass(frozen=True)
class Question:
    conv: str
    kind: str
    query: str
    answer: str
    evidence: tuple[str, ...]  # dia_ids of the conversation `conv`
    language: str = "en"  # of the question: zh, en or mixed (code-switched)
    stale: tuple[str, ...] = ()  # changed-fact: the earlier turns the evidence supersedes (dia_ids)


@dataclass(frozen=True)
class Corpus:
    name: str
    description: str
    turns: list[Turn]
    questions: list[Question]
    kinds: tuple[str, ...]


# ------------------------------------------------------------------------------------------------------------
# Vocabulary: the tables of bench/corpora/conversation_vocabulary.json (its README.md gives source and licence)

_CORPORA = Path(__file__).resolve().parent / "corpora"
_VOCABULARY = json.loads((_CORPORA / "conversation_vocabulary.json").read_text(encoding="utf-8"))

SPEAKERS = _VOCABULARY["speakers"]
FIRST_NAMES = _VOCABULARY["first_names"]
SURNAMES = _VOCABULARY["surnames"]
COUNTRIES = _VOCABULARY["countries"]  # city → country
CITIES = list(COUNTRIES)
PLACE_WORDS = _VOCABULARY["place_words"]
BREEDS = _VOCABULARY["breeds"]  # species → breeds
PET_NAMES = _VOCABULARY["pet_names"]
PET_AGES = [(age["adjective"], age["said"]) for age in _VOCABULARY["pet_ages"]]
PET_TRAITS = _VOCABULARY["pet_traits"]
SWALLOWED = _VOCABULARY["swallowed"]
SHELTER_KINDS = _VOCABULARY["shelter_kinds"]
CLINIC_KINDS = _VOCABULARY["clinic_kinds"]
MOVE_REASONS = _VOCABULARY["move_reasons"]
NEIGHBOURHOODS = _VOCABULARY["neighbourhoods"]
BROKEN = _VOCABULARY["broken"]
COMPANIES = _VOCABULARY["companies"]
COMPANY_KINDS = _VOCABULARY["company_kinds"]
ROLES = _VOCABULARY["roles"]
CODENAMES = _VOCABULARY["codenames"]
PROJECT_DESCS = _VOCABULARY["project_descs"]
CONFERENCE_TOPICS = _VOCABULARY["conference_topics"]
FESTIVALS = _VOCABULARY["festivals"]
BANDS = _VOCABULARY["bands"]
RELATIONS = _VOCABULARY["relations"]
HOBBIES = [(hobby["hobby"], hobby["course"], hobby["made"]) for hobby in _VOCABULARY["hobbies"]]
HOBBY_REASONS = _VOCABULARY["hobby_reasons"]
VENUE_KINDS = _VOCABULARY["venue_kinds"]
AIRLINES = _VOCABULARY["airlines"]
CODE_LETTERS = _VOCABULARY["code_letters"]
HOTEL_FORMS = _VOCABULARY["hotel_forms"]  # str.format templates: {s} a surname, {p} a place word, {f} a first name
LANDMARKS = _VOCABULARY["landmarks"]
TRIP_PLANS = _VOCABULARY["trip_plans"]
TRIP_HIGHLIGHTS = _VOCABULARY["trip_highlights"]
CAR_MODELS = _VOCABULARY["car_models"]
COLOURS = _VOCABULARY["colours"]
DENT_PLACES = _VOCABULARY["dent_places"]
SHOWS = _VOCABULARY["shows"]
DISHES = _VOCABULARY["dishes"]
BOOKS = _VOCABULARY["books"]
CUISINES = _VOCABULARY["cuisines"]
WEATHER = _VOCABULARY["weather"]
KIN = _VOCABULARY["kin"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]  # date.weekday() order
# A relative's news: (news, question, answer, identifier question or None), str.format templates over X, rel and
# the slots the news names (city, other, school, field, baby, band).
RELATIVE_NEWS = [
    (news["news"], news["question"], news["answer"], news["identifier"]) for news in _VOCABULARY["relative_news"]
]
BABY_NAMES = _VOCABULARY["baby_names"]
SCHOOLS = _VOCABULARY["schools"]
FIELDS = _VOCABULARY["fields"]
# The talk around the beats: greetings and closings ({g} the greeter, {o} the other); small talk as (opener,
# replies), the openers' slots filled from the vocabulary, so cities, animals, hobbies, companies and conferences
# come up in turns that answer nothing; asides, a second sentence on about half the turns (chat turns are rarely
# one short line, and these repeat everyday words — work, kids, sleep, family, food — across the conversation).
GREETINGS = _VOCABULARY["greetings"]
GREETING_REPLIES = _VOCABULARY["greeting_replies"]
GREETING_THIRDS = _VOCABULARY["greeting_thirds"]
CLOSINGS = _VOCABULARY["closings"]
CLOSING_REPLIES = _VOCABULARY["closing_replies"]
SMALL_TALK = [(talk["opener"], talk["replies"]) for talk in _VOCABULARY["small_talk"]]
ASIDES = _VOCABULARY["asides"]
BACKCHANNEL = _VOCABULARY["backchannel"]


def _cap(text: str) -> str:
    """The first letter upper-cased, the rest kept (str.capitalize would lower "the Hotel Osei")."""
    return text[:1].upper() + text[1:]


def _long_date(day: dt.date) -> str:
    return f"{day.day} {day:%B %Y}"


def _when(rng: random.Random, day: dt.date) -> tuple[str, dt.date]:
    """A past moment said the way people say it on `day` ("last weekend", "on March 4"), and the date it means."""
    form = rng.choice(["yesterday", "two days ago", "last weekend", "weekday", "date", "a week ago", "this morning"])
    if form == "yesterday":
        return form, day - dt.timedelta(days=1)
    if form == "two days ago":
        return form, day - dt.timedelta(days=2)
    if form == "a week ago":
        return form, day - dt.timedelta(days=7)
    if form == "this morning":
        return form, day
    if form == "last weekend":
        back = (day.weekday() - 5) % 7
        return form, day - dt.timedelta(days=back + 7 if back < 2 else back)  # the Saturday of the weekend before
    if form == "weekday":
        weekday = rng.randrange(5)
        back = (day.weekday() - weekday) % 7 or 7
        return f"last {WEEKDAYS[weekday]}", day - dt.timedelta(days=back)
    when = day - dt.timedelta(days=rng.randint(3, 12))
    return f"on {when:%B} {when.day}", when


# ------------------------------------------------------------------------------------------------------------
# One conversation: arcs place their beats in sessions, the sessions are filled with talk around them


class _Conversation:
    def __init__(self, rng: random.Random, conv: str, names: tuple[str, str], start: dt.date, sessions: int, used: set):
        self.rng, self.conv, self.names, self.used = rng, conv, names, used
        self.dates = [start]
        for _ in range(sessions - 1):
            self.dates.append(self.dates[-1] + dt.timedelta(days=rng.randint(4, 19)))
        self.beats: list[list[list]] = [[] for _ in range(sessions)]  # per session: lists of [who, text, tag]
        self.callbacks: list[tuple[int, int, list]] = []  # (after session, before session, exchange variants)
        self.questions: list[tuple[str, str, str, tuple[str, ...]]] = []
        self.facts: list[dict] = []
        self.arcs = 0

    def unique(self, make) -> str:
        """A value (name, code) no other place in the whole corpus uses: identifiers must identify."""
        for _ in range(1000):
            value = make()
            if value not in self.used:
                self.used.add(value)
                return value
        raise RuntimeError("vocabulary exhausted")

    def pick(self, seq):
        return self.rng.choice(seq)

    def slots(self, beats: int, gap: int = 2) -> list[int]:
        """Sessions for an arc's beats, in order and at least `gap` apart; the first among the least busy of three
        candidates, so that beats spread over the conversation."""
        last_start = len(self.dates) - 1 - gap * (beats - 1)
        first = min(self.rng.sample(range(last_start + 1), 3), key=lambda s: (len(self.beats[s]), self.rng.random()))
        chosen = [first]
        for _ in range(beats - 1):
            room = len(self.dates) - 1 - gap * (beats - len(chosen) - 1)
            chosen.append(min(room, chosen[-1] + self.rng.randint(gap, gap + 5)))
        return chosen

    def beat(self, session: int, x: int, lines: list[tuple[str, str, str | None]]) -> None:
        self.beats[session].append(
            [[x if who == "x" else 1 - x, text, tag and f"{self.arcs}.{tag}"] for who, text, tag in lines]
        )

    def ask(self, kind: str, query: str, answer: str, *tags: str) -> None:
        """A question on the current arc's tags, or on full tags ("<arc>.<tag>") of earlier arcs."""
        self.questions.append((kind, query, answer, tuple(t if "." in t else f"{self.arcs}.{t}" for t in tags)))

    def callback(self, x: int, since: int, exchanges: list[list[tuple[str, str]]], until: int = 10**6) -> None:
        """Exchanges that may come up in the sessions after `since` and before `until`: they repeat an arc's
        names and codes in turns that answer nothing."""
        self.callbacks.append(
            (since, until, [[(x if who == "x" else 1 - x, text) for who, text in ex] for ex in exchanges])
        )

    def fact(self, x: int, kind: str, day: dt.date, tag: str, **values) -> None:
        self.facts.append({"x": x, "kind": kind, "day": day, "tag": f"{self.arcs}.{tag}", **values})


def _pet(c: _Conversation, x: int) -> None:
    X = c.names[x]
    owned = {f["species"] for f in c.facts if f["x"] == x and f["kind"] == "pet"}
    species = c.pick([s for s in BREEDS if s not in owned])
    breed, (age, age_said) = c.pick(BREEDS[species]), c.pick(PET_AGES)
    pet = c.unique(lambda: c.pick(PET_NAMES))
    shelter = c.unique(lambda: f"the {c.pick(PLACE_WORDS)} {c.pick(SHELTER_KINDS)}")
    clinic = c.unique(lambda: f"{c.pick(PLACE_WORDS)} {c.pick(CLINIC_KINDS)}")
    vet = c.unique(lambda: f"Dr. {c.pick(SURNAMES)}")
    item = c.pick(SWALLOWED)
    s1, s2 = c.slots(2)
    when, day = _when(c.rng, c.dates[s1])
    c.beat(
        s1,
        x,
        [
            (
                "x",
                c.pick(
                    [
                        f"Big news: I adopted a {species} {when}!",
                        f"So {when} I finally did it and brought home a {species}.",
                        f"Guess who has a new roommate? I adopted a {species} {when}.",
                        f"We have a new family member! Adopted a {species} {when}.",
                    ]
                ),
                "adopt",
            ),
            (
                "y",
                c.pick(
                    [
                        "No way!! What's the little one's name?",
                        "Oh my gosh, congrats! Name? Tell me everything.",
                        "Aww! Who is it? I need details.",
                    ]
                ),
                None,
            ),
            (
                "x",
                c.pick(
                    [
                        f"Meet {pet}! A {age} {breed} from {shelter}.",
                        f"{pet}, a {age} {breed}. The people at {shelter} said nobody had asked about {pet} in months.",
                        f"{pet}! {_cap(shelter)} had a whole litter and {pet} was the {c.pick(PET_TRAITS)} "
                        f"one. A {breed}, {age_said}.",
                    ]
                ),
                "detail",
            ),
            (
                "y",
                c.pick(
                    [
                        "Cuuute. Send pictures immediately.",
                        f"{pet} is a perfect name.",
                        "I'm so happy for you, that's one lucky animal.",
                    ]
                ),
                None,
            ),
        ],
    )
    c.beat(
        s2,
        x,
        [
            (
                "x",
                c.pick(
                    [
                        f"Rough week. {pet} swallowed {item} and we ended up at the emergency vet.",
                        f"{pet} decided {item} was food, so I spent a whole night at the vet.",
                        f"Guess who ate {item}? {pet}. Guess who paid for an X-ray? Me.",
                    ]
                ),
                "vet",
            ),
            (
                "y",
                c.pick(
                    [
                        f"Oh no! Is {pet} okay?",
                        "That's terrifying. How is the little one now?",
                        f"Poor {pet}! And poor you.",
                    ]
                ),
                None,
            ),
            (
                "x",
                c.pick(
                    [
                        f"Totally fine now. {vet} at {clinic} was amazing with {pet}.",
                        f"{pet} is fine. {vet} at {clinic} got it out without surgery.",
                        f"All good. {vet} from {clinic} said {pet} will live to eat many more weird things.",
                    ]
                ),
                "clinic",
            ),
            ("y", c.pick(["Phew.", "Thank goodness.", f"Give {pet} a hug from me."]), None),
        ],
    )
    c.callback(
        x,
        s1,
        [
            [
                ("y", f"How's {pet} doing?"),
                (
                    "x",
                    c.pick(
                        [
                            "Spoiled rotten, as always.",
                            f"{pet} is great, just stole a sock off the laundry pile.",
                            "Sleeping all day, living the dream.",
                        ]
                    ),
                ),
            ],
            [("x", f"{pet} is curled up on my feet right now."), ("y", f"Give {pet} a scratch from me.")],
            [("x", f"Took {pet} out this morning and {pet} made a new friend."), ("y", "Such a social butterfly!")],
        ],
    )
    c.callback(
        x, s2, [[("x", f"{vet} wants {pet} back for a check-up next month."), ("y", "Fingers crossed it's routine.")]]
    )
    c.ask(
        "single-hop",
        c.pick([f"What breed is {X}'s {species}?", f"What breed of {species} did {X} adopt?"]),
        breed,
        "detail",
    )
    c.ask("single-hop", f"Which shelter did {X} adopt the {species} from?", shelter, "detail")
    c.ask(
        "identifier", c.pick([f"What kind of animal is {pet}?", f"Who is {pet}?"]), f"{X}'s {breed} {species}", "detail"
    )
    c.ask("identifier", f"Who is {vet}?", f"the vet at {clinic} who treated {X}'s {species}", "clinic")
    c.ask(
        "temporal",
        c.pick(
            [
                f"When did {X} adopt the {species}?",
                f"When did {X} bring home a {species}?",
                f"When did {X} get the {breed}?",
            ]
        ),
        _long_date(day),
        "adopt",
    )
    c.ask("multi-hop", f"What did {X}'s {breed} swallow?", item, "detail", "vet")
    c.ask("multi-hop", f"Which clinic treated the {species} {X} adopted from {shelter}?", clinic, "detail", "clinic")
    c.fact(x, "pet", day, "adopt", species=species, pet=pet, phrase=f"adopt {pet}")


def _move(c: _Conversation, x: int) -> None:
    X = c.names[x]
    been = {f["city"] for f in c.facts if f["x"] == x and "city" in f}
    city = c.pick([city for city in CITIES if city not in been])
    reason, hood, broken = c.pick(MOVE_REASONS), c.pick(NEIGHBOURHOODS), c.pick(BROKEN)
    s1, s2 = c.slots(2, gap=1)
    when, day = _when(c.rng, c.dates[s2])
    c.beat(
        s1,
        x,
        [
            (
                "x",
                c.pick(
                    [
                        f"Okay, big announcement: we're moving to {city}! {reason}",
                        f"I have news. I'm moving to {city}. {reason}",
                        f"So... {city}. We're doing it, we're moving. {reason}",
                    ]
                ),
                "plan",
            ),
            ("y", c.pick(["Wait, what?! When?", "Whoa. That's huge! When do you go?", "No! I mean, yay! When?"]), None),
            (
                "x",
                c.pick(
                    [
                        f"In a few weeks. We already signed a lease on a place in {hood}.",
                        f"Soon. We found a place in {hood}, signed the lease yesterday.",
                        f"Not long. The new apartment is in {hood}, I'll send you photos.",
                    ]
                ),
                "lease",
            ),
            (
                "y",
                c.pick(
                    [
                        f"I'll miss you, but {city} is going to be amazing.",
                        "I'm visiting the first chance I get.",
                        "You're brave. I'd never manage a move like that.",
                    ]
                ),
                None,
            ),
        ],
    )
    c.beat(
        s2,
        x,
        [
            (
                "x",
                c.pick(
                    [
                        f"We're officially {city} people. Moved in {when}, and the movers only broke {broken}.",
                        f"Moved in {when}! {city} already feels like home, even though the movers broke {broken}.",
                        f"Greetings from {city}! We moved in {when}. Casualties: {broken}.",
                    ]
                ),
                "done",
            ),
            (
                "y",
                c.pick(["Ha! How's the new place?", "Congrats on surviving the move!", "Finally! How does it feel?"]),
                None,
            ),
            (
                "x",
                c.pick(
                    [
                        "Boxes everywhere, but the light in the kitchen is perfect.",
                        "Still living out of suitcases, honestly.",
                        "The neighbours already brought us cookies.",
                    ]
                ),
                None,
            ),
        ],
    )
    c.callback(
        x,
        s2,
        [
            [
                ("y", f"How's {city} treating you?"),
                (
                    "x",
                    c.pick(
                        [
                            "Loving it. Still getting lost, but loving it.",
                            "The weather takes getting used to, everything else is great.",
                        ]
                    ),
                ),
            ],
            [
                ("x", f"Found the best coffee spot in {city}, two blocks from our place."),
                ("y", "Save me a seat for when I visit."),
            ],
        ],
    )
    c.ask("single-hop", f"Why did {X} decide to move to {city}?", reason, "plan")
    c.ask(
        "single-hop",
        c.pick([f"What did the movers break when {X} moved?", f"What got broken in {X}'s move?"]),
        broken,
        "done",
    )
    c.ask("multi-hop", f"Which neighbourhood of {city} did {X} find an apartment in?", hood, "plan", "lease")
    c.ask(
        "temporal",
        c.pick(
            [
                f"When did {X} move to {city}?",
                f"When did {X} relocate to {COUNTRIES[city]}?",
                f"When did {X} settle into the new home in {COUNTRIES[city]}?",
            ]
        ),
        _long_date(day),
        "done",
    )
    c.fact(x, "move", day, "done", city=city, phrase=f"move to {city}")


def _job(c: _Conversation, x: int) -> None:
    X = c.names[x]
    company = c.unique(lambda: f"{c.pick(COMPANIES)} {c.pick(COMPANY_KINDS)}")
    role = c.pick(ROLES)
    boss_first = c.unique(lambda: c.pick(FIRST_NAMES))
    boss = f"{boss_first} {c.unique(lambda: c.pick(SURNAMES))}"
    codename = c.unique(lambda: f"Project {c.pick(CODENAMES)}")
    desc = c.pick(PROJECT_DESCS)
    s1, s2 = c.slots(2)
    when, day = _when(c.rng, c.dates[s1])
    c.beat(
        s1,
        x,
        [
            (
                "x",
                c.pick(
                    [
                        f"I got the offer from {company} {when}! I'm going to be their new {role}.",
                        f"{_cap(when)} {company} called: I got the {role} job!",
                        f"Guess who's the new {role} at {company}? The offer came {when}.",
                    ]
                ),
                "offer",
            ),
            (
                "y",
                c.pick(
                    [
                        "Congratulations!! You earned it.",
                        "YES. I knew it. Celebration dinner on me.",
                        "That's incredible news!",
                    ]
                ),
                None,
            ),
            (
                "x",
                c.pick(
                    [
                        f"Thanks! My manager will be {boss}, who's been there for ten years.",
                        f"I'll report to {boss}. Really sharp, a bit intimidating.",
                        f"The interview with {boss} went so well, and now {boss_first} is my boss!",
                    ]
                ),
                "boss",
            ),
            (
                "y",
                c.pick(["Sounds like a good start.", "You'll win them over in a week.", "Intimidating is good."]),
                None,
            ),
        ],
    )
    c.beat(
        s2,
        x,
        [
            (
                "x",
                c.pick(
                    [
                        f"Work is nuts, we launch {codename} next week.",
                        f"I'm buried in {codename}. Launch is in ten days.",
                        f"{codename} goes live on Friday and nothing works yet.",
                    ]
                ),
                "project",
            ),
            ("y", c.pick([f"What's {codename}?", "Sounds secret. What is it?", "Remind me what that one is?"]), None),
            (
                "x",
                c.pick(
                    [
                        f"{codename} is {desc}. {boss_first} wants it perfect.",
                        f"It's {desc}; {codename} is just the internal name.",
                        f"{_cap(desc)}. We call it {codename} because someone likes birds.",
                    ]
                ),
                "desc",
            ),
            ("y", c.pick(["Good luck, you've got this.", "Sounds intense.", "Celebrate when it's out!"]), None),
        ],
    )
    c.callback(
        x,
        s1,
        [
            [
                ("y", "How's the new job going?"),
                ("x", c.pick([f"Good! {boss_first} is a great manager.", f"Busy. {company} moves fast."])),
            ],
            [("x", f"Long day at {company}. So many meetings."), ("y", "Hang in there.")],
        ],
    )
    c.callback(x, s1, [[("y", f"Is {boss} still your manager?"), ("x", "Yep, and still great to work with.")]])
    c.callback(
        x,
        s2,
        [[("x", f"The {codename} launch party was fun, {boss_first} gave a speech."), ("y", "You deserve a party.")]],
    )
    c.ask(
        "single-hop",
        c.pick([f"What job did {X} get at {company}?", f"What is {X}'s role at {company}?"]),
        role,
        "offer",
    )
    c.ask("identifier", f"Who is {boss}?", f"{X}'s manager at {company}", "boss")
    c.ask("identifier", f"What is {codename}?", desc, "desc")
    c.ask(
        "temporal",
        c.pick([f"When did {X} get the job offer from {company}?", f"When was {X} hired as a {role}?"]),
        _long_date(day),
        "offer",
    )
    c.ask("multi-hop", f"What is the team of {X}'s manager {boss} launching?", f"{codename}: {desc}", "boss", "project")
    c.fact(x, "job", day, "offer", company=company, phrase=f"join {company}")


def _event(c: _Conversation, x: int) -> None:
    X = c.names[x]
    kind = c.pick(["conference", "festival", "race", "concert", "wedding"])
    companion_rel, companion = c.pick(RELATIONS), c.pick(FIRST_NAMES)
    if kind == "conference":
        topic = c.pick(CONFERENCE_TOPICS)
        event = c.unique(lambda: f"the {topic} conference in {c.pick(CITIES)}")
        highlight = c.pick(
            [
                f"I gave my first ever talk, on {topic}, and nobody threw anything.",
                "The keynote speaker quoted my blog post. I nearly fainted.",
                "I met three people I'd only known online. Worth the jet lag.",
            ]
        )
    elif kind == "festival":
        event = c.unique(lambda: f"the {c.pick(CITIES)} {c.pick(FESTIVALS)}")
        highlight = c.pick(
            [
                "We danced until two in the morning.",
                "A surprise set at midnight, in the rain.",
                "Thirty food stalls and I tried at least twenty.",
            ]
        )
    elif kind == "race":
        event = c.unique(lambda: f"the {c.pick(CITIES)} Half Marathon")
        highlight = c.pick(
            [
                "I finished in 2:04, my best time ever.",
                "Crossing the finish line holding hands.",
                "A stranger gave me a gummy bear at mile ten and saved my life.",
            ]
        )
    elif kind == "concert":
        event = c.unique(lambda: f"the {c.pick(BANDS)} concert in {c.pick(CITIES)}")
        highlight = c.pick(
            [
                "They played our favourite song as the encore.",
                "We ended up in the front row.",
                "The singer came down into the crowd.",
            ]
        )
    else:
        event = c.unique(lambda: f"{c.pick(FIRST_NAMES)}'s wedding in {c.pick(CITIES)}")
        highlight = c.pick(
            [
                "The vows made everyone cry, even the caterers.",
                "I caught the bouquet!",
                "A surprise fireworks show over the water.",
            ]
        )
    (s1,) = c.slots(1)
    when, day = _when(c.rng, c.dates[s1])
    c.beat(
        s1,
        x,
        [
            (
                "x",
                c.pick(
                    [
                        f"{_cap(when)} I went to {event} with my {companion_rel} {companion}.",
                        f"My {companion_rel} {companion} dragged me to {event} {when}.",
                        f"{companion} (my {companion_rel}) and I went to {event} {when}!",
                    ]
                ),
                "attend",
            ),
            ("y", c.pick(["How was it?", "Ooh, I'm jealous. Best part?", "Fun! Tell me everything."]), None),
            ("x", highlight, "highlight"),
            ("y", c.pick(["Love that.", "That sounds unforgettable.", "Okay, next time I'm coming."]), None),
        ],
    )
    c.callback(
        x,
        s1,
        [[("x", f"{companion} already wants to go to {event} again next year."), ("y", "Count me in this time!")]],
    )
    c.ask(
        "single-hop",
        c.pick([f"Who did {X} go to {event} with?", f"Who went to {event} with {X}?"]),
        f"{X}'s {companion_rel} {companion}",
        "attend",
    )
    c.ask("single-hop", f"What was the best part of {event} for {X}?", highlight, "highlight")
    c.ask(
        "temporal",
        c.pick([f"When did {X} go to {event}?", f"When did {X} and {companion} go to {event}?"]),
        _long_date(day),
        "attend",
    )
    c.fact(x, "event", day, "attend", event=event, phrase=f"go to {event}")


def _hobby(c: _Conversation, x: int) -> None:
    X = c.names[x]
    taken = {f["hobby"] for f in c.facts if f["x"] == x and f["kind"] == "hobby"}
    hobby, lesson, products = c.pick([h for h in HOBBIES if h[0] not in taken])
    product, reason = c.pick(products), c.pick(HOBBY_REASONS)
    venue = c.unique(lambda: f"the {c.pick(PLACE_WORDS)} {c.pick(VENUE_KINDS)}")
    s1, s2 = c.slots(2)
    when, day = _when(c.rng, c.dates[s1])
    c.beat(
        s1,
        x,
        [
            (
                "x",
                c.pick(
                    [
                        f"I signed up for {lesson} at {venue}. First session was {when}.",
                        f"New thing: {lesson} at {venue}. Went to my first one {when}.",
                        f"Started {lesson} {when}, at {venue}.",
                    ]
                ),
                "start",
            ),
            ("y", c.pick([f"Oh fun! Why {hobby}?", "Ooh, what made you pick that?", "I love that. How come?"]), None),
            ("x", reason, "why"),
        ],
    )
    c.beat(
        s2,
        x,
        [
            (
                "x",
                c.pick(
                    [
                        f"I finished my first {product}!",
                        f"Look, my first real {product}. Only slightly wonky.",
                        f"Class update: I made a {product} and I'm unreasonably proud.",
                    ]
                ),
                "product",
            ),
            (
                "y",
                c.pick(["Pics or it didn't happen.", "Look at you, a natural!", "I want one. Commission price?"]),
                None,
            ),
        ],
    )
    c.callback(
        x,
        s1,
        [
            [("y", f"Still doing {hobby}?"), ("x", "Every week! I'm getting slightly less terrible.")],
            [("x", f"Missed {hobby} this week, felt weird."), ("y", "It's become your thing!")],
        ],
    )
    c.ask("single-hop", f"What class did {X} sign up for at {venue}?", lesson, "start")
    c.ask("single-hop", f"Why did {X} take up {hobby}?", reason, "why")
    c.ask(
        "temporal",
        c.pick([f"When did {X} start {hobby}?", f"When did {X} begin lessons at {venue}?"]),
        _long_date(day),
        "start",
    )
    c.ask("multi-hop", f"What did {X} make in the class at {venue}?", product, "start", "product")
    c.fact(x, "hobby", day, "start", hobby=hobby, phrase=f"start {hobby}")


def _trip(c: _Conversation, x: int) -> None:
    X = c.names[x]
    been = {f["city"] for f in c.facts if f["x"] == x and "city" in f}
    city = c.pick([city for city in CITIES if city not in been])
    flight = c.unique(lambda: f"{c.pick(AIRLINES)} {c.rng.randint(100, 2999)}")
    code = c.unique(lambda: "".join(c.rng.choice(CODE_LETTERS) for _ in range(6)))
    hotel = c.unique(
        lambda: c.pick(HOTEL_FORMS).format(s=c.pick(SURNAMES), p=c.pick(PLACE_WORDS), f=c.pick(FIRST_NAMES))
    )
    plan, highlight, landmark = c.pick(TRIP_PLANS), c.pick(TRIP_HIGHLIGHTS), c.pick(LANDMARKS)
    s1, s2 = c.slots(2, gap=1)
    when, day = _when(c.rng, c.dates[s2])
    c.beat(
        s1,
        x,
        [
            (
                "x",
                c.pick(
                    [
                        f"Booked {city}! Flight {flight}, confirmation {code}. Writing it here so I don't lose it.",
                        f"It's official, I'm going to {city}. {flight}, booking code {code}, don't let me forget.",
                        f"Flights to {city} done: {flight}, confirmation {code}.",
                    ]
                ),
                "book",
            ),
            (
                "y",
                c.pick(
                    [
                        "Ooh, what's the plan there?",
                        "Finally a real holiday! What will you do?",
                        "Jealous. What's on the itinerary?",
                    ]
                ),
                None,
            ),
            ("x", plan, None),
        ],
    )
    c.beat(
        s2,
        x,
        [
            (
                "x",
                c.pick(
                    [
                        f"Back from {city} {when}! {highlight}",
                        f"Got home from {city} {when}. {highlight}",
                        f"{city} recap: {highlight} Landed back home {when}.",
                    ]
                ),
                "back",
            ),
            (
                "y",
                c.pick(["Where did you stay?", "Jealous! Was the hotel nice?", "Amazing. Where were you staying?"]),
                None,
            ),
            (
                "x",
                c.pick(
                    [
                        f"{_cap(hotel)}, right by {landmark}. Would stay again.",
                        f"At {hotel}, five minutes from {landmark}.",
                        f"{_cap(hotel)}. Tiny room, great view of {landmark}.",
                    ]
                ),
                "hotel",
            ),
        ],
    )
    c.callback(
        x, s1, [[("x", f"Checked in online for {flight} already, window seat!"), ("y", "Organised as ever.")]], until=s2
    )
    c.callback(
        x,
        s2,
        [[("x", f"Still dreaming about {city}. Looking at the photos again."), ("y", "Post-holiday blues are real.")]],
    )
    c.ask(
        "identifier",
        c.pick(
            [f"Where was {X} flying with confirmation code {code}?", f"Which trip was booked under the code {code}?"]
        ),
        f"{X}'s trip to {city}",
        "book",
    )
    c.ask("identifier", f"Whose flight is {flight}?", f"{X}'s, to {city}", "book")
    c.ask(
        "temporal",
        c.pick([f"When did {X} get back from {city}?", f"When did {X} come home from the trip to {COUNTRIES[city]}?"]),
        _long_date(day),
        "back",
    )
    c.ask("multi-hop", f"Which hotel did {X} stay at in {city}?", hotel, "back", "hotel")
    c.fact(x, "trip", day, "back", city=city, phrase=f"travel to {city}")


def _relative(c: _Conversation, x: int) -> None:
    X = c.names[x]
    rel = c.pick([r for r in RELATIONS if not any(f["x"] == x and f.get("rel") == r for f in c.facts)])
    first = c.unique(lambda: c.pick(FIRST_NAMES))
    news, question, answer, identifier = c.pick(RELATIVE_NEWS)
    makers = {
        "city": lambda: c.pick(CITIES),
        "other": lambda: c.pick(FIRST_NAMES),
        "school": lambda: c.pick(SCHOOLS),
        "field": lambda: c.pick(FIELDS),
        "baby": lambda: c.unique(lambda: c.pick(BABY_NAMES)),
        "band": lambda: c.unique(lambda: f"{c.pick(['The', 'Lost', 'Small'])} {c.pick(CODENAMES)}s"),
    }
    values = {"X": X, "rel": rel}
    values.update({key: make() for key, make in makers.items() if "{" + key + "}" in news})  # names stay unique
    s1, s2 = c.slots(2)
    c.beat(
        s1,
        x,
        [
            (
                "x",
                c.pick(
                    [
                        f"My {rel} {first} is staying with us this week.",
                        f"My {rel} {first} called me for two hours last night.",
                        f"Had dinner with my {rel} {first}, the funniest person I know.",
                        f"My {rel} {first} helped me paint the living room.",
                    ]
                ),
                "intro",
            ),
            ("y", c.pick([f"Aw, how is {first}?", f"I've always liked {first}.", "That sounds nice."]), None),
            (
                "x",
                c.pick(["Same as ever, full of plans.", "Good! Busy, but good.", "Honestly, a bit restless lately."]),
                None,
            ),
        ],
    )
    c.beat(
        s2,
        x,
        [
            ("x", c.pick(["Did I tell you? ", "Family news: ", "Oh! "]) + f"{first} " + news.format(**values), "news"),
            ("y", c.pick(["No way! Tell them congrats from me.", "That's wonderful!", "Wow, good for them!"]), None),
        ],
    )
    c.callback(x, s1, [[("x", f"{first} says hi, by the way."), ("y", f"Hi back to {first}!")]])
    c.ask("multi-hop", question.format(**values), answer.format(**values), "intro", "news")
    if identifier:
        c.ask("identifier", identifier.format(**values), f"{X}'s {rel} {first}", "intro", "news")
    c.fact(x, "relative", c.dates[s2], "news", rel=rel)


def _car(c: _Conversation, x: int) -> None:
    X = c.names[x]
    model, colour, place = c.pick(CAR_MODELS), c.pick(COLOURS), c.pick(DENT_PLACES)
    plate = c.unique(lambda: "".join(c.rng.choice(CODE_LETTERS) for _ in range(3)) + f"-{c.rng.randint(1000, 9999)}")
    s1, s2 = c.slots(2)
    when, day = _when(c.rng, c.dates[s1])
    c.beat(
        s1,
        x,
        [
            (
                "x",
                c.pick(
                    [
                        f"Bought a used {colour} {model} {when}! Plate {plate}, I keep forgetting it.",
                        f"I finally have a car: a {colour} {model}, picked it up {when}. Plate is {plate}.",
                    ]
                ),
                "buy",
            ),
            ("y", c.pick(["Nice upgrade!", "Road trip time!", "Look at you, a car owner."]), None),
        ],
    )
    c.beat(
        s2,
        x,
        [
            (
                "x",
                c.pick(
                    [
                        f"Someone dented the {model} {place} and just drove off.",
                        f"Came back to the {model} {place} and found a huge dent in the door.",
                    ]
                ),
                "dent",
            ),
            ("y", c.pick(["Ugh, people.", "No note? Unbelievable.", "That's so frustrating."]), None),
        ],
    )
    c.callback(
        x,
        s1,
        [
            [("x", f"The {model} needs new tyres already."), ("y", "Cars are just money pits with wheels.")],
            [("x", f"Renewed the registration for {plate} today, what a queue."), ("y", "The worst.")],
        ],
    )
    c.ask(
        "identifier",
        c.pick([f"Whose car has the licence plate {plate}?", f"What car has the plate {plate}?"]),
        f"{X}'s {colour} {model}",
        "buy",
    )
    c.ask("single-hop", f"What car did {X} buy?", f"a {colour} {model}", "buy")
    c.ask(
        "temporal",
        c.pick([f"When did {X} buy the {model}?", f"When did {X} become a car owner?"]),
        _long_date(day),
        "buy",
    )
    c.ask("multi-hop", f"Where did {X}'s {colour} car get dented?", place, "buy", "dent")
    c.fact(x, "car", day, "buy", phrase=f"buy the {model}")


# Arcs per speaker: each a fresh name, place or code; several of a kind make a speaker's facts compete.
ARC_PLAN = [
    (_pet, 1),
    (_pet, 0.5),
    (_move, 1),
    (_move, 0.4),
    (_job, 1),
    (_event, 1),
    (_event, 1),
    (_event, 0.5),
    (_hobby, 1),
    (_hobby, 0.5),
    (_trip, 1),
    (_trip, 1),
    (_trip, 0.4),
    (_relative, 1),
    (_relative, 1),
    (_car, 0.6),
]


def _cross_questions(c: _Conversation) -> None:
    """Questions that join two arcs of one speaker: what came after what, and lists over arcs."""
    for x in (0, 1):
        X = c.names[x]
        facts = sorted((f for f in c.facts if f["x"] == x), key=lambda f: f["day"])
        moves = [f for f in facts if f["kind"] == "move"]
        for event in (f for f in facts if f["kind"] == "event"):
            after = [m for m in moves if m["day"] > event["day"]]
            if after:
                c.ask(
                    "multi-hop",
                    f"Which city did {X} move to after {event['event']}?",
                    after[0]["city"],
                    event["tag"],
                    after[0]["tag"],
                )
        pairs = [
            (a, b)
            for a, b in itertools.combinations(facts, 2)
            if "phrase" in a and "phrase" in b and a["day"] != b["day"]
        ]
        for first, then in c.rng.sample(pairs, min(2, len(pairs))):
            a, b, answer = (first, then, "before") if c.rng.random() < 0.5 else (then, first, "after")
            c.ask(
                "multi-hop",
                f"Did {X} {a['phrase']} before or after {X} {b['phrase']}?",
                answer,
                first["tag"],
                then["tag"],
            )
        for kind, query in (("trip", f"Which cities has {X} travelled to?"), ("pet", f"What pets does {X} have?")):
            tags = [f["tag"] for f in facts if f["kind"] == kind]
            if len(tags) > 1:
                answer = ", ".join(f.get("city") or f.get("pet") for f in facts if f["kind"] == kind)
                c.ask("multi-hop", query, answer, *tags)


# ------------------------------------------------------------------------------------------------------------
# Talk around the beats


def _fill(c: _Conversation, template: str) -> str:
    return template.format(
        weather=c.pick(WEATHER),
        show=c.pick(SHOWS),
        species=c.pick(list(BREEDS)),
        city=c.pick(CITIES),
        topic=c.pick(CONFERENCE_TOPICS),
        hobby=c.pick(HOBBIES)[0],
        dish=c.pick(DISHES),
        kin=c.pick(KIN),
        company=f"{c.pick(COMPANIES)} {c.pick(COMPANY_KINDS)}",
        weekday=c.pick(WEEKDAYS),
        book=c.pick(BOOKS),
        cuisine=c.pick(CUISINES),
        band=c.pick(BANDS),
    )


def _small_talk(c: _Conversation) -> list[tuple[int, str, None]]:
    """An exchange on nothing in particular; its opener is whoever did not speak last (see _session)."""
    who = c.rng.randrange(2)
    opener, replies = c.pick(SMALL_TALK)
    values = {"city": c.pick(CITIES), "book": c.pick(BOOKS)}  # a reply may echo the opener's city or book
    opener = _fill(c, opener.replace("{city}", values["city"]).replace("{book}", values["book"]))
    lines = [(who, opener, None), (1 - who, c.pick(replies).format(**values), None)]
    if c.rng.random() < 0.35:
        lines.append((who, c.pick(BACKCHANNEL), None))
    return lines


def _session(c: _Conversation, s: int) -> list[tuple[int, str, str | None]]:
    rng, g = c.rng, c.rng.randrange(2)
    names = {"g": c.names[g], "o": c.names[1 - g]}
    opening = [(g, c.pick(GREETINGS).format(**names), None), (1 - g, c.pick(GREETING_REPLIES).format(**names), None)]
    if rng.random() < 0.5:
        opening.append((g, c.pick(GREETING_THIRDS), None))
    segments = [([tuple(line) for line in beat], False) for beat in c.beats[s]]
    open_callbacks = [variants for since, until, variants in c.callbacks if since < s < until]
    for variants in rng.sample(open_callbacks, min(len(open_callbacks), rng.randint(1, 3))):
        segments.append(([(who, text, None) for who, text in c.pick(variants)], False))
    target = rng.randint(24, 30) - len(opening) - 2
    while sum(len(lines) for lines, _ in segments) < target:
        segments.append((_small_talk(c), True))
    rng.shuffle(segments)
    lines = list(opening)
    for segment, either_side in segments:
        flip = either_side and segment[0][0] == lines[-1][0]  # small talk keeps the turns alternating
        lines += [(1 - who if flip else who, text, tag) for who, text, tag in segment]
    lines += [(g, c.pick(CLOSINGS).format(**names), None), (1 - g, c.pick(CLOSING_REPLIES).format(**names), None)]
    return [
        (who, f"{text} {_fill(c, c.pick(ASIDES))}" if rng.random() < 0.5 else text, tag) for who, text, tag in lines
    ]


def _conversation(c: _Conversation) -> tuple[list[Turn], list[Question]]:
    for x in (0, 1):
        for arc, share in ARC_PLAN:
            if c.rng.random() < share:
                c.arcs += 1
                arc(c, x)
    _cross_questions(c)
    turns, dia_of = [], {}
    for s, day in enumerate(c.dates):
        for n, (who, text, tag) in enumerate(_session(c, s), start=1):
            dia_id = f"D{s + 1}:{n}"
            turns.append(Turn(c.conv, dia_id, c.names[who], day, text))
            if tag:
                dia_of[tag] = dia_id
    questions = [
        Question(c.conv, kind, query, answer, tuple(dict.fromkeys(dia_of[t] for t in tags)))
        for kind, query, answer, tags in c.questions
    ]
    return turns, questions


def generate(conversations: int = 6, sessions: int = 20, seed: int = SEED) -> Corpus:
    """`conversations` conversations of `sessions` sessions (24–30 turns each), and the same number of questions
    of each kind (the smallest kind's count, the others sampled down)."""
    rng = random.Random(seed)
    used: set = set()
    names = rng.sample(SPEAKERS, 2 * conversations)  # no speaker in two conversations: "When did Tom…" is one Tom
    turns, questions = [], []
    for i in range(conversations):
        start = dt.date(2022, 1, 3) + dt.timedelta(days=rng.randint(0, 540))
        conv = _Conversation(rng, f"c{i + 1}", (names[2 * i], names[2 * i + 1]), start, sessions, used)
        conv_turns, conv_questions = _conversation(conv)
        turns += conv_turns
        questions += conv_questions
    by_kind = {kind: [q for q in questions if q.kind == kind] for kind in KINDS}
    keep = min(map(len, by_kind.values()))
    kept = {id(q) for qs in by_kind.values() for q in rng.sample(qs, keep)}
    questions = [q for q in questions if id(q) in kept]
    description = (
        f"generated (bench/conversation_corpus.py, seed {seed}): {conversations} conversations of "
        f"{sessions} dated sessions, {len(turns):,} turns, {len(questions)} questions "
        f"({keep} of each kind)"
    )
    return Corpus("generated", description, turns, questions, KINDS)


# ------------------------------------------------------------------------------------------------------------
# LoCoMo

_DIA_ID = re.compile(r"D\d+:\d+")


def _locomo_samples(path: Path) -> list[dict]:
    """locomo10.json's samples; from the repository's zip, its one-file-per-conversation form brought to that
    shape (`sample_id` "conv-<n>", the sessions under `conversation`)."""
    if path.suffix != ".zip":
        return json.loads(path.read_text())
    samples = []
    with zipfile.ZipFile(path) as archive:
        for name in sorted(n for n in archive.namelist() if re.search(r"/\d+\.json$", n)):
            data = json.loads(archive.read(name))
            sessions = {
                k: v
                for k, v in data.items()
                if k.startswith(("speaker_", "session_")) and not k.endswith(("_summary", "_observation"))
            }
            samples.append({"sample_id": f"conv-{Path(name).stem}", "conversation": sessions, "qa": data["qa"]})
    return samples


def read_locomo(path: Path) -> Corpus:
    turns, questions, skipped = [], [], {"adversarial": 0, "no evidence": 0}
    for sample in _locomo_samples(path):
        conv, sessions = sample["sample_id"], sample["conversation"]
        for key in sorted((k for k in sessions if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:])):
            day = dt.datetime.strptime(sessions[f"{key}_date_time"], "%I:%M %p on %d %B, %Y").date()
            turns += [Turn(conv, turn["dia_id"], turn["speaker"], day, turn["text"]) for turn in sessions[key]]
        known = {t.dia_id for t in turns if t.conv == conv}
        for qa in sample["qa"]:
            if qa["category"] == 5:
                skipped["adversarial"] += 1
                continue
            # A few evidence entries hold two ids ("D8:6; D9:17") or name a turn that does not exist.
            evidence = tuple(dict.fromkeys(i for e in qa["evidence"] for i in _DIA_ID.findall(e) if i in known))
            if not evidence:
                skipped["no evidence"] += 1
                continue
            questions.append(
                Question(conv, LOCOMO_KINDS[qa["category"]], qa["question"], str(qa.get("answer", "")), evidence)
            )
    kinds = tuple(
        k for k in ("single-hop", "multi-hop", "temporal", "open-domain") if any(q.kind == k for q in questions)
    )
    description = (
        f"LoCoMo ({path.name}, snap-research/locomo, CC BY-NC 4.0, not in the repository): "
        f"{len({t.conv for t in turns})} conversations, {len(turns):,} turns, {len(questions):,} questions "
        f"(categories 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop; {skipped['adversarial']} "
        f"adversarial and {skipped['no evidence']} without a valid evidence id left out)"
    )
    return Corpus("locomo", description, turns, questions, kinds)


# ------------------------------------------------------------------------------------------------------------
# The Chinese conversations (stored: bench/corpora/conversation_zh_turns.jsonl and conversation_zh_questions.jsonl)


def read_chinese() -> Corpus:
    """The three stored conversations mostly in Chinese and their questions (bench/corpora/README.md)."""
    turns = [
        Turn(**{**record, "date": dt.date.fromisoformat(record["date"])})
        for record in corpus_records("conversation_zh_turns.jsonl")
    ]
    questions = [
        Question(**{**record, "evidence": tuple(record["evidence"]), "stale": tuple(record["stale"])})
        for record in corpus_records("conversation_zh_questions.jsonl")
    ]
    counts = {kind: sum(q.kind == kind for q in questions) for kind in CHINESE_KINDS}
    languages = {language: sum(q.language == language for q in questions) for language in LANGUAGES}
    description = (
        f"Chinese conversations (bench/corpora/conversation_zh_*.jsonl, written for ovsite): "
        f"{len({t.conv for t in turns})} conversations of {len({(t.conv, t.date) for t in turns})} dated sessions, "
        f"{len(turns)} turns, {len(questions)} questions ("
        + ", ".join(f"{n} {kind}" for kind, n in counts.items())
        + "; "
        + ", ".join(f"{n} {language}" for language, n in languages.items())
        + ")"
    )
    return Corpus("chinese", description, turns, questions, CHINESE_KINDS)


def _order(dia_id: str) -> tuple[int, int]:
    session, turn = dia_id[1:].split(":")
    return int(session), int(turn)


def validate_chinese(corpus: Corpus) -> None:
    """Every turn's dia_id is unique in its conversation and its sessions are dated in order; every question's kind
    and language are known and its evidence and stale turns exist; a changed-fact question has one evidence turn and
    at least one stale turn, each earlier than the evidence (an earlier session, or earlier in the same one), and
    only a changed-fact question has stale turns."""
    known: dict[str, dict[str, dt.date]] = {}
    for turn in corpus.turns:
        if not _DIA_ID.fullmatch(turn.dia_id):
            raise ValueError(f"{turn.conv} {turn.dia_id}: not a dia_id (D<session>:<turn>)")
        turns = known.setdefault(turn.conv, {})
        if turn.dia_id in turns:
            raise ValueError(f"{turn.conv} {turn.dia_id}: twice")
        turns[turn.dia_id] = turn.date
    for conv, turns in known.items():
        dated = sorted(turns.items(), key=lambda item: _order(item[0]))
        if any(a[1] > b[1] for a, b in itertools.pairwise(dated)):
            raise ValueError(f"{conv}: sessions out of date order")
    for question in corpus.questions:
        name = f"{question.conv} {question.query!r}"
        if question.kind not in corpus.kinds or question.language not in LANGUAGES:
            raise ValueError(f"{name}: kind {question.kind!r} or language {question.language!r} unknown")
        missing = [d for d in question.evidence + question.stale if d not in known.get(question.conv, {})]
        if not question.evidence or missing:
            raise ValueError(f"{name}: no evidence, or turns that do not exist: {missing}")
        if question.kind != "changed-fact":
            if question.stale:
                raise ValueError(f"{name}: stale turns on a {question.kind} question")
            continue
        if len(question.evidence) != 1 or not question.stale:
            raise ValueError(f"{name}: a changed fact has one evidence turn (the newer) and the stale ones")
        newer = _order(question.evidence[0])
        later = [d for d in question.stale if _order(d) >= newer]
        if later:
            raise ValueError(f"{name}: stale turns {later} are not earlier than the evidence {question.evidence[0]}")
