"""The demo's text, from the standard library alone: dates, the task's rows and the pre-training corpus.

``build_demo.py`` writes the datasets from these rows and pre-trains the demo model on this corpus. Whatever
is random draws from the ``random.Random`` it is given, so the same seed gives the same text.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable

YEARS = range(1970, 2040)
REPEAT_SHARE = 0.2
TABLE_SHARE = 0.4

MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

# Three phrasings of the instruction: the tuned model must follow any of them.
PROMPTS = [
    "Write the month and day of {iso} in words",
    "Which month and day is {iso}?",
    "Read this date as month and day: {iso}",
]


# ----------------------------------------------------------------------------------------------
# Dates and the task
# ----------------------------------------------------------------------------------------------


def random_date(rng: random.Random) -> dt.date:
    """A uniformly random valid date in YEARS."""
    start = dt.date(YEARS.start, 1, 1).toordinal()
    end = dt.date(YEARS.stop - 1, 12, 31).toordinal()
    return dt.date.fromordinal(rng.randint(start, end))


def iso(day: dt.date) -> str:
    """``2024-03-15``."""
    return day.isoformat()


def long_form(day: dt.date) -> str:
    """``March 15, 2024``: how prose in the pre-training corpus writes a date."""
    return f"{MONTHS[day.month - 1]} {day.day}, {day.year}"


def month_and_day(day: dt.date) -> str:
    """``March 15``: the task's one correct answer."""
    return f"{MONTHS[day.month - 1]} {day.day}"


def wrong_month_and_day(day: dt.date, rng: random.Random) -> str:
    """A plausible but wrong answer, for the rejected side of the preference set."""
    month = MONTHS[day.month - 1]
    mistakes: list[Callable[[], str]] = [
        lambda: f"{MONTHS[(day.month - 1 + rng.choice([-1, 1])) % 12]} {day.day}",
        lambda: f"{month} {day.day + rng.choice([-1, 1]) or 2}",
        lambda: f"{day.day} {month}",
        lambda: f"{month} {day.day}, {day.year}",
    ]
    if day.day <= 12 and day.day != day.month:
        # The classic day/month confusion, only where it gives a valid-looking date.
        mistakes.append(lambda: f"{MONTHS[day.day - 1]} {day.month}")
    if day.day < 10:  # a leading zero kept is a mistake only where there is one
        mistakes.append(lambda: f"{month} {day.day:02d}")
    return rng.choice(mistakes)()


def distinct_dates(rng: random.Random, count: int, exclude: set[dt.date]) -> list[dt.date]:
    """``count`` different random dates, none of them in ``exclude``."""
    chosen: list[dt.date] = []
    seen = set(exclude)
    while len(chosen) < count:
        day = random_date(rng)
        if day not in seen:
            seen.add(day)
            chosen.append(day)
    return chosen


def sft_row(day: dt.date, rng: random.Random) -> dict:
    """One conversational training example."""
    prompt = rng.choice(PROMPTS).format(iso=iso(day))
    return {
        "messages": [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": month_and_day(day)},
        ]
    }


def preference_row(day: dt.date, rng: random.Random) -> dict:
    """One conversational preference example (TRL's explicit-prompt format)."""
    prompt = rng.choice(PROMPTS).format(iso=iso(day))
    return {
        "prompt": [{"role": "user", "content": prompt}],
        "chosen": [{"role": "assistant", "content": month_and_day(day)}],
        "rejected": [{"role": "assistant", "content": wrong_month_and_day(day, rng)}],
    }


def ordinal(number: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``21st``, ..."""
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def ordinal_month_and_day(day: dt.date) -> str:
    """``March 15th``: the answer style the DPO demo prefers."""
    return f"{MONTHS[day.month - 1]} {ordinal(day.day)}"


def style_row(day: dt.date, rng: random.Random) -> dict:
    """One preference example of the DPO demo: the same correct answer in the preferred style (an ordinal day)
    over the style the SFT demo teaches (a plain day)."""
    prompt = rng.choice(PROMPTS).format(iso=iso(day))
    return {
        "prompt": [{"role": "user", "content": prompt}],
        "chosen": [{"role": "assistant", "content": ordinal_month_and_day(day)}],
        "rejected": [{"role": "assistant", "content": month_and_day(day)}],
    }


# ----------------------------------------------------------------------------------------------
# Pre-training corpus: coherent prose that uses both date styles, numbers and the prompts' words
# ----------------------------------------------------------------------------------------------


def words(text: str) -> list[str]:
    """Split a space-separated word list (keeps the lists below short)."""
    return text.split()


NAMES = words(
    "Anna Ben Clara David Elena Farid Grace Hugo Ines Jonas Kofi Lena Marco Nora Oscar Priya "
    "Quentin Rosa Samir Tara Umar Vera Wen Yusuf Zoe Amir Bea Carlos Dina Emil Fatima Georg Hana"
)
PLACES = words(
    "library office station harbour museum school market hospital garden bakery theatre airport "
    "river castle village factory stadium bridge park hotel farm island valley church bank"
)
EVENTS = words(
    "meeting concert festival lecture match wedding trial launch party exam race parade auction "
    "dinner holiday journey election harvest opening exhibition conference workshop ceremony"
)
THINGS = words(
    "report letter invoice ticket form record note file entry contract receipt diary message "
    "poster book map photo budget schedule list calendar journal license passport summary order"
)
VERBS = words(
    "signed opened closed checked printed sent saved found read copied filed lost stamped moved "
    "shared updated archived posted approved rejected delivered cleaned painted repaired packed"
)
ADJECTIVES = words(
    "short long old new small large quiet busy cold warm bright dark happy strange simple careful "
    "early late rainy sunny calm windy famous local final formal green golden heavy light slow"
)

# Each document has a small cast that its sentences keep referring to, as real text does. The
# repeats teach the model to look back and copy (dates, years, names), which is the machinery a
# short LoRA run needs. Some sentences give a date in both styles, as real text sometimes does: that
# is knowledge a pre-trained model would have; answering a chat request with it is what the demo teaches.
WRITTEN_DATE_SENTENCES = [
    "The {event} was held on {written} at the {place}.",
    "{written} was a {weekday}.",
    "{name} was born on {written}.",
    "On {written}, {name} went to the {place}.",
    "The {event} is planned for {written}.",
    "{name} remembers {written} well.",
    "{written}: {name} met {other} at the {place}.",
    "In {month} {year}, the {event} moved to the {place}.",
    "{month} is a {adj} month at the {place}.",
    "{name} and {other} left the {place} in {year}.",
]
ISO_DATE_SENTENCES = [
    "Log {iso}: the {thing} was {verb}.",
    "The {thing} dated {iso} was {verb} by {name}.",
    "{iso} {hour}:{minute} {name} {verb} the {thing}.",
    "File {thing}_{iso}.txt was {verb} at {hour}:{minute}.",
    "Entry {count} has the code {iso}.",
    "{iso} is the code on the {thing}.",
]
# Reading an ISO date's year, month number and day is general knowledge of the notation, not the demo
# task (which also needs the month's name and the written layout); the base learns it here.
ISO_PART_SENTENCES = [
    "The {thing} dated {iso} is from {iso_year}.",
    "Log {iso}: day {iso_day} of {iso_year} was {adj}.",
    "{name} {verb} the {thing} on day {iso_day}, as the code {iso} shows.",
    "The year in {iso} is {iso_year}.",
    "The code {iso} means day {iso_day} in the year {iso_year}.",
    "Log {iso} ({iso_year}, day {iso_day}): the {thing} was {verb}.",
    "In {iso}, the month is {iso_month} and the day is {iso_day}.",
    "The code {iso} is day {iso_day} of month {iso_month} in {iso_year}.",
    "Log {iso}: month {iso_month}, {thing} {verb}.",
]
PAIRED_DATE_SENTENCES = [
    "Log {iso}, that is {iso_written}: the {thing} was {verb}.",
    "The code {iso} stands for {iso_written}.",
    "{name} {verb} the {thing} on {iso_written} (code {iso}).",
    "The {thing} dated {iso} was {verb} on {iso_written}.",
    "{iso_written} is written {iso} on the {thing}.",
]
NUMBER_SENTENCES = [
    "There were {count} {thing}s at the {place}.",
    "In {year}, {name} {verb} {count} {thing}s.",
    "{year} was a {adj} year for {name}.",
    "{name} counted {count}, then {more}.",
    "Day {day} of the {event} was {adj}.",
    "The {thing} has {count} pages.",
]
# Sentences that use the words of the prompts without ever showing the task.
PLAIN_SENTENCES = [
    "Please rewrite the {thing} in plain words.",
    "Rewrite this {thing} in a {adj} style.",
    "Convert the {thing} to a {adj} form before you send it.",
    "What is the {thing} about?",
    "The {thing} was written out in full by {name}.",
    "{name} wrote the {thing} in long form.",
    "Each date in the {thing} is written in a different style.",
    "A written date is easier to read than a code.",
    "The form asks for the date in full.",
    "Write out the {thing} in full.",
    "Which date is written on the {thing}?",
    "{name} said: convert to a written date, please.",
]
SENTENCE_KINDS = [
    WRITTEN_DATE_SENTENCES,
    ISO_DATE_SENTENCES,
    ISO_PART_SENTENCES,
    PAIRED_DATE_SENTENCES,
    NUMBER_SENTENCES,
    PLAIN_SENTENCES,
]
SENTENCE_WEIGHTS = [2, 1, 2, 4, 1, 1]


def document_cast(rng: random.Random) -> dict[str, str]:
    """The entities one document keeps mentioning."""
    written_day = random_date(rng)
    iso_day = random_date(rng)
    while iso_day == written_day:
        iso_day = random_date(rng)
    name, other = rng.sample(NAMES, 2)
    count = rng.randint(1, 99)
    return {
        "name": name,
        "other": other,
        "written": long_form(written_day),
        "weekday": WEEKDAYS[written_day.weekday()],
        "month": MONTHS[written_day.month - 1],
        "year": str(written_day.year),
        "iso": iso(iso_day),
        "iso_year": str(iso_day.year),
        "iso_day": str(iso_day.day),
        "iso_month": str(iso_day.month),
        "iso_written": long_form(iso_day),
        "day": str(rng.randint(1, 31)),
        "count": str(count),
        "more": str(count + rng.randint(1, 9)),
        "thing": rng.choice(THINGS),
        "place": rng.choice(PLACES),
        "event": rng.choice(EVENTS),
    }


def sentence(rng: random.Random, cast: dict[str, str]) -> str:
    """One sentence about the cast; verbs, adjectives and times vary per sentence."""
    template = rng.choice(rng.choices(SENTENCE_KINDS, SENTENCE_WEIGHTS)[0])
    fields = {
        **cast,
        "verb": rng.choice(VERBS),
        "adj": rng.choice(ADJECTIVES),
        "hour": f"{rng.randint(0, 23):02d}",
        "minute": f"{rng.randint(0, 59):02d}",
    }
    return template.format(**fields)


def list_items(rng: random.Random) -> list[str]:
    """A few items of one kind: ISO dates, written dates, years, numbers, names or words."""
    kind = rng.randrange(6)
    count = rng.randint(3, 6)
    if kind == 0:
        return [iso(random_date(rng)) for _ in range(count)]
    if kind == 1:
        return [long_form(random_date(rng)) for _ in range(count)]
    if kind == 2:
        return [str(rng.choice(YEARS)) for _ in range(count)]
    if kind == 3:
        return [str(rng.randint(1, 99)) for _ in range(count)]
    words = NAMES if kind == 4 else THINGS + PLACES + EVENTS + MONTHS
    return rng.sample(words, count)


def repeat_document(rng: random.Random) -> str:
    """A list and the same list again. Real text repeats itself; here it does so often enough that
    the model learns to look back and copy within a short pre-training."""
    items = "; ".join(list_items(rng))
    label = rng.choice(["List", "Notes", "Codes", "Items", "Entries", "Dates"])
    again = rng.choice(["Again", "Once more", "Copy", "Repeat"])
    return f"{label}: {items}.\n{again}: {items}."


TABLE_TITLES = ["Calendar", "Date codes", "Log index", "Schedule", "Archive dates", "Key dates"]
TABLE_ROWS = [
    "{iso} | {written}",
    "{iso} = {written}",
    "{iso}: {written}",
    "{iso} ({written})",
]


def table_document(rng: random.Random) -> str:
    """A small table of dates in both styles, as calendars, ledgers and indexes print them."""
    layout = rng.choice(TABLE_ROWS)
    days = [random_date(rng) for _ in range(rng.randint(4, 8))]
    rows = [layout.format(iso=iso(day), written=long_form(day)) for day in days]
    return rng.choice(TABLE_TITLES) + ":\n" + "\n".join(rows)


def corpus_document(rng: random.Random) -> str:
    """A short document: a table of dates, a repeated list, or a few lines of sentences about one cast."""
    draw = rng.random()
    if draw < TABLE_SHARE:
        return table_document(rng)
    if draw < TABLE_SHARE + REPEAT_SHARE:
        return repeat_document(rng)
    cast = document_cast(rng)
    lines = []
    for _ in range(rng.randint(2, 5)):
        lines.append(" ".join(sentence(rng, cast) for _ in range(rng.randint(1, 3))))
    return "\n".join(lines)


def build_corpus(rng: random.Random, docs: int) -> list[str]:
    """The pre-training corpus, one string per document."""
    return [corpus_document(rng) for _ in range(docs)]
