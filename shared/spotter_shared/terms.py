"""The searchable words of a message (seed 000: "token extraction strips stopwords — articles,
verbs, calendar tokens, entity nouns — before lexical search"), in English, Hebrew and Russian.

Rag searches by them; they live here so the orchestrator can tell, with the same code, a message
ambient search would find nothing for (too short, or no searchable word) and not ask (`searchable`).

Each kept word carries its variants: itself; in Hebrew, the word without the one-letter
prefixes that attach to it (ה ו ב ל מ ש כ: "לסער" → "סער", "ובסקוואט" → "סקוואט"); in Russian
and English, a light stem without a case or plural ending ("Коэном" → "коэн", "squats" →
"squat"); and, for names written in another script, consonant-skeleton patterns (phonetic.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from .phonetic import HEBREW, query_patterns, script_of

MAX_TERMS = 8
# A message shorter than this gets no ambient search (chit-chat: "thanks!", "ok do it").
MIN_QUERY_CHARS = 30

# Words that never identify an entity: articles, pronouns, auxiliaries and common verbs, calendar
# words, the entity nouns themselves, in English, Hebrew and Russian. Calendar words that are also
# common first names (April, June, August, Shani/שני) stay searchable.
STOPWORDS = frozenset(
    """
    a an the this that these those there here some any all each every both other another such
    i me my mine we us our ours you your yours he him his she her hers it its they them their theirs
    who whom whose what which when where why how
    anyone anybody someone somebody everyone everybody anything something everything nothing nobody
    is am are was were be been being do does did doing done have has had having
    can could will would shall should may might must need needs want wants wanted
    please thanks thank hi hello hey ok okay yes no not
    and or but if then than so as at by for from in into of on onto to with without about
    above after before below between during over under up down out off again also just only
    very more most less least much many few too really
    find found show tell give get got list search look lookup see check know let make
    create add update edit change delete remove cancel send move set use using help
    like put keep bring go going come say said
    new old last next first latest recent
    today tomorrow yesterday tonight now morning afternoon evening noon night
    day days week weeks weekly month months monthly year years daily weekend
    monday tuesday wednesday thursday friday saturday sunday
    mon tue tues wed thu thur thurs fri sat sun pm
    january february march july september october november december
    jan feb mar apr jul aug sep sept oct nov dec
    member members program programs workout workouts class classes session sessions
    exercise exercises movement movements coach coaches athlete athletes client clients people person
    assignment assignments booking bookings schedule scheduled publish published unpublish
    plan plans payment payments status details detail info information
    name names named called email emails phone number
    variation variations version versions alternative alternatives kind type similar instead
    time times long lot lots great good nice bad well feel feeling thing things stuff way sure
    right fine cool awesome maybe later busy friend friends asking looking sounds work works
    working start starts started end hour hours minute minutes late early soon goes went gone
    don doesn didn isn aren wasn weren won can couldn shouldn wouldn haven hasn hadn ll ve
    """.split()
    + """
    של את על עם זה זו זאת מה מי איך איפה מתי למה כמה אני אתה את הוא היא אנחנו אתם הם הן
    כל לא כן יש אין גם או אם כי רק עוד כבר אבל הזה הזאת שלי שלך שלו שלה שלנו שלהם לי לו לה לנו
    ומה וגם ואם ואז אז שזה וזה וזו והוא והיא ואני כשאני אותו אותה אותם אותן אותי אותך לגבי בשביל עבור אצל
    מישהו מישהי משהו כמו היה הייתה היו יהיה איזה איזו אילו הרבה קצת מאוד טוב
    היום מחר אתמול עכשיו בוקר ערב שבוע חודש שנה ראשון שלישי רביעי חמישי שישי שבת
    בבקשה תודה תמצא מצא חפש תחפש תראה הראה תראי ספר תספר תגיד תן תני רוצה צריך אפשר
    תמצאי מצאי חפשי תחפשי הראי תגידי ספרי תספרי רוצה רוצים צריכה צריכים יכול יכולה תוכל תוכלי
    תבדוק בדוק תבדקי תוסיף הוסף תמחק מחק תעדכן עדכן תשלח שלח תבטל בטל
    חבר חברה חברים מתאמן מתאמנת מתאמנים תכנית תוכנית תכניות תוכניות אימון אימונים שיעור שיעורים
    סשן מפגש מאמן מאמנת תשלום תשלומים מנוי סטטוס מצב לקוח לקוחה לקוחות תרגיל תרגילים וריאציה
    וריאציות גרסה סוג דומה
    שלום שלומך שלומכם נשמע הכל הכול אצלי רבה עזרה בסדר סבבה יופי מעולה נהדר לילה זמן
    מכל בכל לכל שכל וכל אחרי לפני במיוחד קשה קל הרבה ביחד לדעת יודע יודעת הבא הבאה הקודם הקודמת
    אחרון אחרונה
    """.split()
    + """
    и в во не что он на я с со как а то все всё она так его но да ты к у же вы за бы по только ее её
    мне было вот от меня еще ещё нет о из ему теперь когда даже ну ли если уже или ни быть был
    него до вас нибудь опять уж вам ведь там потом себя ничего ей может они тут где есть надо ней
    для мы тебя их чем была сам чтоб без будто чего раз тоже себе под будет ж тогда кто этот того
    потому этого какой какая какие какое совсем ним здесь этом почти мой моя мои тем чтобы нее
    сейчас были куда зачем всех никогда можно при наконец об другой хоть после над больше тот
    через эти нас про всего них много разве эту впрочем хорошо свою этой перед иногда лучше чуть
    том нельзя такой им более всегда конечно между это наш наша наши ваш ваша ваши сколько почему
    привет здравствуйте спасибо пожалуйста найди найти найдите покажи показать покажите расскажи
    расскажите скажи скажите дай дайте хочу хотел хотела нужно нужен нужна нужны проверь проверить
    посмотри посмотреть создай создать добавь добавить удали удалить измени изменить отмени отменить
    отправь отправить поищи ищу искать список знаешь знать есть какой-нибудь
    сегодня завтра вчера утром утро вечером вечер днем днём день дня дней неделя недели неделю
    месяц месяца год года понедельник вторник среда среду четверг пятница пятницу суббота субботу
    воскресенье завтрашний завтрашнюю завтрашняя завтрашней завтрашнее сегодняшний сегодняшнюю
    сегодняшняя сегодняшней вчерашний вчерашнюю вчерашняя время дела помощь помочь помоги отлично
    ладно окей понятно добрый доброе ночи
    участник участника участники участников клиент клиента клиенты клиентов член члены
    программа программы программу программе тренировка тренировки тренировку тренировок
    упражнение упражнения упражнений занятие занятия занятий класс классы сессия тренер тренера
    тренеры спортсмен оплата оплаты оплатил оплатила платеж платёж платежа статус план плана
    абонемент абонемента вариант варианты вариация вариацию вариации похожее похожие
    """.split()
)

# A Hebrew word may carry a geresh inside or at its end (קנג'י, ג'ורג'): ג׳ is j, צ׳ ch, ז׳ zh, and the
# word must stay whole for its consonant key (phonetic.py) rather than split at the mark.
_WORD = re.compile(r"[\u05d0-\u05ea]+(?:['’׳`][\u05d0-\u05ea]*)*|\w+", re.UNICODE)
_HEBREW_PREFIXES = frozenset("הובלמשכ")
# Russian case endings (nouns and adjectives: "становую тягу" → "станов", "тяг") and English
# plurals, longest first. A Russian stem keeps at least three letters and is then matched by the
# start of a word in a name ("тяг" finds "тяга", "станов" finds "становая"); an English one four.
_RU_ENDINGS = tuple(sorted(
    "ами ями ого его ому ему ыми ими ией иям иях ия ий ие ию ья ье ью ом ем ой ей ам ям ах ях ов ев "
    "ую юю ая яя ое ее ые ых их ым им ою ею ы и а я у ю е о ь"
    .split(), key=len, reverse=True))
_EN_ENDINGS = ("es", "s")
_MIN_STEM = 4
_MIN_STEM_RU = 3


@dataclass(frozen=True)
class Term:
    """One searchable word of a message: the word, the spellings it is searched by, the LIKE
    patterns of its consonant skeleton in other scripts, and its weight in the fusion."""

    word: str
    variants: tuple[str, ...]
    phonetic: tuple[str, ...] = field(default=())
    weight: float = 1.0
    # Variants that are the word without an ending: matched by the start of a name's word even
    # when three letters long ("тяг" in "тяга"), where a whole short word would match whole.
    stems: tuple[str, ...] = field(default=())

    @property
    def patterns(self) -> list[str]:
        return [like_pattern(v) for v in self.variants]


def like_pattern(word: str) -> str:
    """A substring pattern; a word under three letters (דן, טל) only as a whole word — bodies pad
    every word with spaces — which keeps it cheap for the trigram index and precise."""
    escaped = escape_like(word)
    return f"%{escaped}%" if len(word) >= 3 else f"% {escaped} %"


_NOT_ALNUM = re.compile(r"[\W_]+", re.UNICODE)


def name_pattern(word: str, *, stem: bool = False) -> str:
    """A pattern for the start of a word in a name, over names whose punctuation is spaces
    ("chest to bar pull up"): "saar" finds "Saar Cohen", "bar" only the word "bar" (three letters
    or fewer match whole words: "bar" is in "Inbar" and "Baron", "car" in "Carter"). A `stem` (a
    word without its ending, three letters or more) always matches by the start of a word."""
    words = _NOT_ALNUM.sub(" ", word).strip()
    escaped = escape_like(words)
    return f"% {escaped}%" if len(words) >= 4 or (stem and len(words) >= 3) else f"% {escaped} %"


def escape_like(word: str) -> str:
    # Backslash is ILIKE's default escape character, so it must be escaped first.
    return word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _hebrew_stems(word: str) -> list[str]:
    """The word without one or two attached one-letter prefixes, each at least three letters
    (two would match too much: "כהן" is not "כ" + "הן")."""
    stems = []
    rest = word
    for _ in range(2):
        if rest[:1] in _HEBREW_PREFIXES and len(rest) - 1 >= 3:
            rest = rest[1:]
            stems.append(rest)
        else:
            break
    return stems


def _stem(word: str, endings: tuple[str, ...], min_stem: int = _MIN_STEM) -> list[str]:
    for ending in endings:
        if word.endswith(ending) and len(word) - len(ending) >= min_stem:
            return [word[: -len(ending)]]
    return []


def _ending_stems(word: str) -> list[str]:
    """The word without a case or plural ending (Russian or English), if it has one."""
    script = script_of(word)
    if script == "c":
        return _stem(word, _RU_ENDINGS, _MIN_STEM_RU)
    if word.isascii():
        return _stem(word, _EN_ENDINGS)
    return []


def variants_of(word: str) -> list[str]:
    """The word and the forms it is also searched by."""
    if script_of(word) == HEBREW:
        return [word, *_hebrew_stems(word)]
    return [word, *_ending_stems(word)]


def _is_noise(word: str) -> bool:
    if word in STOPWORDS or not any(c.isalpha() for c in word):
        return True
    # Latin words of one or two letters are noise; Hebrew names are often two letters (דן, טל).
    if len(word) < (3 if word.isascii() else 2):
        return True
    # "והיום", "בשבוע", "התשלום": a stopword behind a prefix is still a stopword.
    return script_of(word) == HEBREW and any(stem in STOPWORDS for stem in _hebrew_stems(word))


def make_term(word: str, weight: float = 1.0) -> Term:
    forms = variants_of(word)
    phonetic = tuple(dict.fromkeys(p for form in forms for p in query_patterns(form)))
    stems = tuple(f for f in _ending_stems(word) if f in forms)
    return Term(word, tuple(forms), phonetic, weight, stems)


def extract_terms(text: str, *, weight: float = 1.0, limit: int = MAX_TERMS) -> list[Term]:
    """The message's searchable words, in order, without duplicates, at most `limit`."""
    words: list[str] = []
    for word in _words(text):
        if word not in words:
            words.append(word)
    return [make_term(w, weight) for w in words[:limit]]


def unsearched(text: str) -> Literal["too_short", "no_terms"] | None:
    """Why ambient search does not search this message (rag's answer: `AmbientResult.skipped`), or None
    when it does."""
    if len(text.strip()) < MIN_QUERY_CHARS:
        return "too_short"
    if next(_words(text), None) is None:
        return "no_terms"
    return None


def searchable(text: str) -> bool:
    """Whether ambient search would search this message at all (the orchestrator asks rag only then)."""
    return unsearched(text) is None


def _words(text: str) -> Iterator[str]:
    for word in _WORD.findall(text.lower()):
        # \w includes "_" and digits; neither names a member or a program.
        word = word.strip("_")
        if not _is_noise(word):
            yield word
