"""Coach messages for the ambient round trip: English, Hebrew and Russian, 30+ characters, each one
new (a fresh text means a fresh query embedding: nothing memoised helps), naming the demo studio's
members and exercises the way coaches do, so the lexical side has real work as well."""

from __future__ import annotations

import random

MEMBERS = {
    "en": ["Saar Cohen", "Olga Petrova", "Kenji Tanaka", "Noa Mizrahi", "Itai Friedman", "Michal Rosen", "Dani Rubin"],
    "he": ["סער כהן", "אולגה פטרובה", "נועה ברק", "יוסי אלון", "איתי פרידמן", "מיכל רוזן", "דני רובין"],
    "ru": ["Саар Коэн", "Ольга Петрова", "Алекс Иванов", "Кенджи Танака", "Михаль Розен", "Дани Рубин", "Мария Гарсия"],
}
EXERCISES = {
    "en": ["back squats", "deadlifts", "pull-ups", "double unders", "wall balls", "kettlebell swings", "burpees", "thrusters"],
    "he": ["סקוואט", "דדליפט", "מתח", "דאבל אנדר", "וול בול", "סווינג", "ברפי", "תראסטר"],
    "ru": ["приседания со штангой", "становую тягу", "подтягивания", "двойные прыжки", "махи гирей", "берпи", "трастеры",
           "отжимания"],
}
DAYS = {
    "en": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Sunday"],
    "he": ["ראשון", "שני", "שלישי", "רביעי", "חמישי"],
    "ru": ["понедельник", "вторник", "среду", "четверг", "пятницу", "воскресенье"],
}
TEMPLATES = {
    "en": [
        "Can you add {n} {ex} to {member}'s plan for {day}?",
        "How did {member} do on the {ex} last {day}? She said {n} reps felt heavy",
        "{member} wants to swap {ex} for something easier, {n} minutes max",
        "Put {n} {ex} in the {day} metcon and tell {member}",
        "Did {member} log the {ex} from {day}? I think it was {n} rounds",
    ],
    "he": [
        "תוסיף {n} {ex} לתוכנית של {member} ליום {day}",
        "איך הלך ל{member} ה{ex} ביום {day}? היא אמרה ש{n} חזרות היו כבדות",
        "{member} רוצה להחליף את ה{ex} במשהו קל יותר, מקסימום {n} דקות",
        "תכניס {n} {ex} לאימון של יום {day} ותעדכן את {member}",
        "האם {member} רשם את ה{ex} מיום {day}? נראה לי שזה היה {n} סבבים",
    ],
    "ru": [
        "Добавь {n} раз {ex} в план {member} на {day}",
        "Как {member} справилась с {ex} в {day}? Говорит, {n} повторов было тяжело",
        "{member} хочет заменить {ex} на что-то полегче, максимум {n} минут",
        "Поставь {ex} {n} раз в комплекс на {day} и предупреди: {member}",
        "{member} записал результат за {day}? Кажется, там было {n} раундов, {ex}",
    ],
}


def fresh_messages(count: int, seed: int = 8) -> list[tuple[str, str]]:
    """`count` distinct (language, message) pairs, the languages in turn."""
    rng = random.Random(seed)
    langs = list(TEMPLATES)
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    while len(out) < count:
        lang = langs[len(out) % len(langs)]
        text = rng.choice(TEMPLATES[lang]).format(
            n=rng.randint(3, 150), ex=rng.choice(EXERCISES[lang]), member=rng.choice(MEMBERS[lang]),
            day=rng.choice(DAYS[lang]),
        )
        if len(text) >= 30 and text not in seen:
            seen.add(text)
            out.append((lang, text))
    return out
