"""What the member coach demo says, in the member's language (English, Hebrew or Russian by the
script the member wrote in)."""

from __future__ import annotations

from typing import Any

PHRASES: dict[str, dict[str, str]] = {
    "intro": {
        "en": 'Here\'s your workout "{title}" — {count} exercises, about {minutes} minutes. '
              "Tell me if you'd like to swap or adjust anything.",
        "he": 'הנה האימון שלך "{title}" — {count} תרגילים, בערך {minutes} דקות. אפשר לבקש ממני להחליף או לשנות כל תרגיל.',
        "ru": "Вот ваша тренировка «{title}»: упражнений — {count}, около {minutes} минут. "
              "Скажите, если что-то заменить или изменить.",
    },
    "swapped": {
        "en": "Done — I swapped {old} for {new}.",
        "he": "בוצע — החלפתי את {old} ב-{new}.",
        "ru": "Готово — заменил «{old}» на «{new}».",
    },
    "adjusted": {
        "en": "Updated {name}: {change}.",
        "he": "עדכנתי את {name}: {change}.",
        "ru": "Обновил «{name}»: {change}.",
    },
    "removed": {
        "en": "Removed {name} from your workout.",
        "he": "הסרתי את {name} מהאימון.",
        "ru": "Убрал «{name}» из тренировки.",
    },
    "logged": {
        "en": "Great work! I logged {count} exercises to your history.",
        "he": "כל הכבוד! רשמתי {count} תרגילים בהיסטוריה שלך.",
        "ru": "Отличная работа! Записал упражнений в историю: {count}.",
    },
    "location": {
        "en": "You're now set to {name} — I'll plan around its equipment.",
        "he": "עברת ל-{name} — אתכנן לפי הציוד שיש שם.",
        "ru": "Текущая локация — {name}. Буду учитывать её оборудование.",
    },
    "history": {
        "en": "Here's your last {days} days: {summary}",
        "he": "הנה {days} הימים האחרונים שלך: {summary}",
        "ru": "Ваши последние {days} дней: {summary}",
    },
    "history_empty": {
        "en": "I couldn't find any logged workouts in the last {days} days. Want me to build one?",
        "he": "לא מצאתי אימונים רשומים ב-{days} הימים האחרונים. לבנות לך אימון?",
        "ru": "За последние {days} дней тренировок не найдено. Составить тренировку?",
    },
    "failed": {
        "en": "Sorry — I couldn't {action}: {reason}",
        "he": "מצטער — לא הצלחתי {action}: {reason}",
        "ru": "Извините — не получилось {action}: {reason}",
    },
    "no_workout": {
        "en": "I don't see an active workout yet. Want me to build one?",
        "he": "אין כרגע אימון פעיל. לבנות לך אחד?",
        "ru": "Активной тренировки пока нет. Составить?",
    },
    "which": {
        "en": "Which exercise do you mean?",
        "he": "לאיזה תרגיל התכוונת?",
        "ru": "Какое упражнение вы имеете в виду?",
    },
    "what_change": {
        "en": "What would you like to change about it?",
        "he": "מה לשנות בתרגיל?",
        "ru": "Что изменить в упражнении?",
    },
    "vague": {
        "en": "What would you like to do today?",
        "he": "מה תרצה לעשות היום?",
        "ru": "Чем займёмся сегодня?",
    },
    "greeting": {
        "en": "Hi! I'm your Spotter coach. I can build a workout, swap or adjust exercises, log what you did and "
              "show your progress — what would you like today?",
        "he": "היי! אני המאמן שלך ב-Spotter. אפשר לבנות אימון, להחליף או לשנות תרגילים, לרשום אימון ולראות התקדמות — "
              "מה בא לך היום?",
        "ru": "Привет! Я ваш тренер Spotter: составлю тренировку, заменю или изменю упражнения, запишу выполненное и "
              "покажу прогресс. Что сегодня?",
    },
    "thanks": {
        "en": "You're welcome! Ping me whenever you're ready for the next session.",
        "he": "בשמחה! תכתוב לי כשתהיה מוכן לאימון הבא.",
        "ru": "Пожалуйста! Пишите, когда будете готовы к следующей тренировке.",
    },
    "general": {
        "en": "Good question! I'm best at workouts: I can build one for you, adjust it, log it and track your "
              "progress. Want me to put a session together?",
        "he": "שאלה טובה! אני הכי טוב באימונים: לבנות, לשנות, לרשום ולעקוב אחרי ההתקדמות. לבנות לך אימון?",
        "ru": "Хороший вопрос! Лучше всего я умею работать с тренировками: составить, изменить, записать и "
              "отследить прогресс. Составить тренировку?",
    },
    "goals": {
        "en": "Your goals right now: {goals}. I'll keep every workout pointed at them.",
        "he": "המטרות שלך כרגע: {goals}. כל אימון יכוון אליהן.",
        "ru": "Ваши текущие цели: {goals}. Каждая тренировка будет на них направлена.",
    },
    "missing_tool": {
        "en": "I'd need {tool} for that, but it isn't available to me right now.",
        "he": "בשביל זה אני צריך את {tool}, אבל הוא לא זמין לי כרגע.",
        "ru": "Для этого нужен инструмент {tool}, но сейчас он недоступен.",
    },
}

OPTIONS: dict[str, dict[str, list[str]]] = {
    "start": {
        "en": ["Full body workout", "Upper body", "Legs", "Show my progress"],
        "he": ["אימון כל הגוף", "פלג גוף עליון", "רגליים", "ההתקדמות שלי"],
        "ru": ["Всё тело", "Верх тела", "Ноги", "Мой прогресс"],
    },
    "edit": {
        "en": ["Swap an exercise", "Make it harder", "Log my workout", "Build a new workout"],
        "he": ["להחליף תרגיל", "להקשות", "לרשום את האימון", "אימון חדש"],
        "ru": ["Заменить упражнение", "Сделать сложнее", "Записать тренировку", "Новая тренировка"],
    },
    "change": {
        "en": ["Make it harder", "Make it easier", "More sets", "Fewer reps"],
        "he": ["להקשות", "להקל", "עוד סט", "פחות חזרות"],
        "ru": ["Сложнее", "Легче", "Больше подходов", "Меньше повторов"],
    },
    "build": {
        "en": ["Yes, build a workout", "Not now"],
        "he": ["כן, לבנות אימון", "לא עכשיו"],
        "ru": ["Да, составить", "Не сейчас"],
    },
}

ACTIONS: dict[str, dict[str, str]] = {
    "generate_workout": {"en": "create that workout", "he": "ליצור את האימון", "ru": "создать тренировку"},
    "swap_exercise": {"en": "swap that exercise", "he": "להחליף את התרגיל", "ru": "заменить упражнение"},
    "adjust_exercise": {"en": "adjust that exercise", "he": "לשנות את התרגיל", "ru": "изменить упражнение"},
    "remove_exercise": {"en": "remove that exercise", "he": "להסיר את התרגיל", "ru": "убрать упражнение"},
    "log_workout": {"en": "log your workout", "he": "לרשום את האימון", "ru": "записать тренировку"},
    "fetch_data": {"en": "load your data", "he": "לטעון את הנתונים שלך", "ru": "загрузить ваши данные"},
    "set_current_location": {"en": "switch your location", "he": "להחליף מיקום", "ru": "сменить локацию"},
}


def language(text: str) -> str:
    if any("\u0590" <= c <= "\u05ff" for c in text):
        return "he"
    if any("\u0400" <= c <= "\u04ff" for c in text):
        return "ru"
    return "en"


def say(key: str, lang: str, **values: Any) -> str:
    table = PHRASES[key]
    return table.get(lang, table["en"]).format(**values)


def options(key: str, lang: str) -> list[str]:
    table = OPTIONS[key]
    return list(table.get(lang, table["en"]))


def action(tool: str, lang: str) -> str:
    table = ACTIONS.get(tool) or {"en": f"run {tool}", "he": f"להפעיל את {tool}", "ru": f"выполнить {tool}"}
    return table.get(lang, table["en"])
