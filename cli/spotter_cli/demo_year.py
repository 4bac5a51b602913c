"""A realistic studio year ending on a given day, for `spotter seed-demo` and for tests.

`seed_demo_year(conn, org_id, today)` fills one organization with ~300 members (joins, churn,
pauses, members drifting away), plans with their history and monthly payments, a weekly timetable
with a year of sessions (and the next two weeks) with bookings and attendance, a year of workouts
with sections and movements linked to the exercise library, coaching comments with per-coach read
state, personal assignments, tasks, program templates and forms.

Deterministic: every draw comes from `random.Random` seeded with a constant (and the member's or
the day's key), and every date is relative to `today`, so the same `today` gives the same data in
any fresh organization. Idempotent: payments are only ever written here (no service writes them),
so an organization that already has payments already has its year and is left as it is. Fast:
each table is written with one `INSERT … SELECT FROM unnest(…)` per batch.

Rows carry their own ids (uuid4 from the seeded generator would collide between two orgs seeded
with the same `today`, so ids come from uuid.uuid4(); no aggregate depends on them).
"""

from __future__ import annotations

import json
import random
import uuid
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import asyncpg

_YEAR_LOCK = 0x5EED_7EA  # advisory lock class of the year's writer; the org id is the key
SEED = 7_2026  # any constant; changing it changes the whole demo year
MEMBERS_GENERATED = 300
WEEKS_AHEAD = 2

# ---------------------------------------------------------------------------------------------------
# Exercise library: (name, modality, equipment, muscles, aliases), comma-separated for brevity.

W, G, MO, S, MB, O = "weightlifting", "gymnastics", "monostructural", "strongman", "mobility", "other"
_EXERCISES = """
Back Squat|W|barbell,squat rack|quads,glutes,hamstrings,core|BS,High-bar Squat,Squat
Front Squat|W|barbell,squat rack|quads,glutes,upper back,core|FS
Overhead Squat|W|barbell|quads,glutes,shoulders,core|OHS
Deadlift|W|barbell|hamstrings,glutes,lower back,grip|DL,Conventional Deadlift
Sumo Deadlift|W|barbell|glutes,adductors,hamstrings|
Sumo Deadlift High Pull|W|barbell|glutes,hamstrings,traps,shoulders|SDHP
Romanian Deadlift|W|barbell|hamstrings,glutes,lower back|RDL
Bench Press|W|barbell,bench|chest,triceps,shoulders|Bench,Flat Bench
Strict Press|W|barbell|shoulders,triceps,core|Shoulder Press,Military Press,Overhead Press,OHP
Push Press|W|barbell|shoulders,triceps,legs|PP
Push Jerk|W|barbell|shoulders,triceps,legs|PJ
Split Jerk|W|barbell|shoulders,triceps,legs|
Clean|W|barbell|legs,glutes,back,traps|Squat Clean,Full Clean
Power Clean|W|barbell|legs,glutes,back,traps|PC
Hang Clean|W|barbell|legs,glutes,back,traps|
Hang Power Clean|W|barbell|legs,glutes,back,traps|HPC
Snatch|W|barbell|legs,glutes,back,shoulders|Squat Snatch,Full Snatch
Power Snatch|W|barbell|legs,glutes,back,shoulders|
Hang Snatch|W|barbell|legs,glutes,back,shoulders|
Hang Power Snatch|W|barbell|legs,glutes,back,shoulders|HPS
Clean and Jerk|W|barbell|full body|C&J,Clean & Jerk
Thruster|W|barbell|quads,glutes,shoulders|Barbell Thruster
Cluster|W|barbell|quads,glutes,shoulders,back|Squat Clean Thruster
Snatch Pull|W|barbell|hamstrings,glutes,traps|
Clean Pull|W|barbell|hamstrings,glutes,traps|
Snatch Balance|W|barbell|quads,shoulders,core|
Muscle Snatch|W|barbell|shoulders,traps,upper back|
Good Morning|W|barbell|hamstrings,lower back|
Barbell Row|W|barbell|upper back,lats,biceps|Bent-over Row,Pendlay Row
Barbell Lunge|W|barbell|quads,glutes|Back Rack Lunge
Overhead Lunge|W|barbell,plate|quads,glutes,shoulders,core|
Zercher Squat|W|barbell|quads,glutes,upper back|
Pause Squat|W|barbell,squat rack|quads,glutes|
Box Squat|W|barbell,box|glutes,hamstrings|
Incline Bench Press|W|barbell,bench|chest,shoulders|
Close-grip Bench Press|W|barbell,bench|triceps,chest|CGBP
Hip Thrust|W|barbell,bench|glutes,hamstrings|Barbell Hip Thrust
Shoulder-to-overhead|W|barbell|shoulders,triceps,legs|S2OH,STOH
Ground-to-overhead|W|barbell,plate|full body|G2OH
Floor Press|W|barbell|chest,triceps|
Kettlebell Swing|W|kettlebell|glutes,hamstrings,core|KB Swing,Russian Swing,American Swing
Goblet Squat|W|kettlebell|quads,glutes,core|Kettlebell Goblet Squat
Turkish Get-up|W|kettlebell|shoulders,core,glutes|TGU
Kettlebell Snatch|W|kettlebell|shoulders,glutes,grip|KB Snatch
Kettlebell Clean|W|kettlebell|glutes,hamstrings,grip|KB Clean
Kettlebell Deadlift|W|kettlebell|hamstrings,glutes|KB Deadlift
Dumbbell Snatch|W|dumbbell|glutes,shoulders,grip|DB Snatch
Dumbbell Clean|W|dumbbell|legs,glutes,traps|DB Clean
Dumbbell Thruster|W|dumbbell|quads,glutes,shoulders|DB Thruster
Dumbbell Push Press|W|dumbbell|shoulders,triceps|DB Push Press
Dumbbell Bench Press|W|dumbbell,bench|chest,triceps|DB Bench
Dumbbell Row|W|dumbbell,bench|lats,upper back|One-arm Row,DB Row
Devil Press|W|dumbbell|full body|
Man Maker|W|dumbbell|full body|
Dumbbell Walking Lunge|W|dumbbell|quads,glutes|DB Walking Lunge
Dumbbell Box Step-up|W|dumbbell,box|quads,glutes|DB Step-up
Dumbbell Hang Clean and Jerk|W|dumbbell|full body|DB Hang Clean and Jerk
Dumbbell Overhead Squat|W|dumbbell|quads,shoulders,core|DB OHS
Bulgarian Split Squat|W|dumbbell,bench|quads,glutes|Rear-foot Elevated Split Squat
Single-leg Romanian Deadlift|W|dumbbell|hamstrings,glutes|Single-leg RDL
Dumbbell Curl|W|dumbbell|biceps|Biceps Curl
Triceps Extension|W|dumbbell|triceps|Skull Crusher
Lateral Raise|W|dumbbell|shoulders|
Wall Ball|W|medicine ball,wall target|quads,glutes,shoulders|Wall Ball Shot,Wallball,WB
Medicine Ball Clean|W|medicine ball|legs,glutes|Med Ball Clean
Pull-up|G|pull-up bar|lats,biceps,grip|Pullup,Kipping Pull-up
Strict Pull-up|G|pull-up bar|lats,biceps,grip|
Chest-to-bar Pull-up|G|pull-up bar|lats,biceps,grip|C2B,CTB,Chest-to-bar
Butterfly Pull-up|G|pull-up bar|lats,core|
Chin-up|G|pull-up bar|biceps,lats|
Bar Muscle-up|G|pull-up bar|lats,chest,triceps|BMU
Muscle-up|G|rings|lats,chest,triceps|Ring Muscle-up,RMU
Toes-to-bar|G|pull-up bar|core,hip flexors,grip|T2B,TTB
Knees-to-elbows|G|pull-up bar|core,hip flexors|K2E
Hanging Knee Raise|G|pull-up bar|core,hip flexors|
Handstand Push-up|G|wall,abmat|shoulders,triceps|HSPU
Strict Handstand Push-up|G|wall,abmat|shoulders,triceps|Strict HSPU
Handstand Walk|G||shoulders,core|HS Walk
Handstand Hold|G|wall|shoulders,core|
Wall Walk|G|wall|shoulders,core|
Push-up|G||chest,triceps,core|Pushup,Press-up
Hand-release Push-up|G||chest,triceps,core|HRPU
Ring Dip|G|rings|triceps,chest|
Bar Dip|G|parallel bars|triceps,chest|Dip
Burpee|G||full body|Burpees
Burpee Box Jump-over|G|box|full body|BBJO
Bar-facing Burpee|G|barbell|full body|
Burpee Pull-up|G|pull-up bar|full body|
Box Jump|G|box|quads,glutes,calves|
Box Jump-over|G|box|quads,glutes,calves|BJO
Box Step-up|G|box|quads,glutes|Step-up
Air Squat|G||quads,glutes|Bodyweight Squat,Squat (bodyweight)
Pistol|G||quads,glutes,balance|Pistol Squat,Single-leg Squat
Lunge|G||quads,glutes|Alternating Lunge,Forward Lunge
Walking Lunge|G||quads,glutes|
Jumping Lunge|G||quads,glutes,calves|
Sit-up|G|abmat|core|AbMat Sit-up,Situp
GHD Sit-up|G|GHD|core,hip flexors|GHD Situp
GHD Hip Extension|G|GHD|lower back,glutes|Back Extension,Hip Extension
V-up|G||core|
Hollow Hold|G||core|
Hollow Rock|G||core|
Superman Hold|G||lower back,glutes|
L-sit|G|parallettes|core,hip flexors,triceps|
Plank|G||core,shoulders|Front Plank,Forearm Plank
Side Plank|G||obliques,core|
Rope Climb|G|climbing rope|lats,biceps,grip|
Legless Rope Climb|G|climbing rope|lats,biceps,grip|
Ring Row|G|rings|upper back,biceps|
Inverted Row|G|barbell,squat rack|upper back,biceps|Bodyweight Row
Tuck Jump|G||quads,calves|
Broad Jump|G||quads,glutes,calves|Standing Long Jump
Mountain Climber|G||core,hip flexors|
Jumping Jack|G||full body|
Bear Crawl|G||shoulders,core|
Inchworm|G||hamstrings,shoulders,core|
Glute Bridge|G||glutes,hamstrings|
Skin the Cat|G|rings|shoulders,core|
Kipping Swing|G|pull-up bar|lats,core|Kip Swing
Run|MO||legs,cardio|Running,Jog
Sprint|MO||legs,cardio|
Shuttle Run|MO||legs,cardio|
Row|MO|rower|back,legs,cardio|Rowing,Rower,C2 Row,Erg
Bike|MO|air bike|legs,cardio|Assault Bike,Air Bike,Echo Bike
Ski Erg|MO|ski erg|lats,triceps,core,cardio|Ski,SkiErg
Bike Erg|MO|bike erg|legs,cardio|BikeErg
Double-under|MO|jump rope|calves,shoulders,cardio|DU,Double Unders
Single-under|MO|jump rope|calves,cardio|Jump Rope,Singles
Swim|MO|pool|full body,cardio|
Ruck|MO|weight vest|legs,cardio|Rucking
Stair Climb|MO||legs,cardio|Stairs
Farmer's Carry|S|dumbbell,kettlebell|grip,traps,core|Farmers Walk,Farmer's Walk
Sled Push|S|sled|quads,glutes|Prowler Push
Sled Pull|S|sled,rope|hamstrings,back|Sled Drag
Sandbag Carry|S|sandbag|core,upper back,legs|
Sandbag Clean|S|sandbag|glutes,back|Sandbag to Shoulder
Yoke Carry|S|yoke|full body|Yoke Walk
Atlas Stone|S|atlas stone|glutes,back,biceps|Stone Load
Tire Flip|S|tire|glutes,hamstrings,back|
Overhead Carry|S|kettlebell,dumbbell,plate|shoulders,core|Waiter Walk
Suitcase Carry|S|kettlebell,dumbbell|obliques,grip|
Front Rack Carry|S|kettlebell|core,upper back|
Battle Rope|S|battle rope|shoulders,cardio|Battle Ropes
D-ball Over Shoulder|S|d-ball|glutes,back|Ball Over Shoulder
PVC Pass-through|MB|pvc pipe|shoulders|Pass-through,Shoulder Dislocate
Couch Stretch|MB|wall|hip flexors,quads|
Pigeon Pose|MB||glutes,hips|Pigeon Stretch
World's Greatest Stretch|MB||hips,hamstrings,thoracic spine|
Thoracic Rotation|MB||thoracic spine|T-spine Rotation
Cat-Cow|MB||spine|
Hip 90/90|MB||hips|90/90 Hip Switch
Foam Rolling|MB|foam roller|full body|Foam Roll
Banded Shoulder Distraction|MB|band|shoulders|
Deep Squat Hold|MB||hips,ankles|Squat Hold
Child's Pose|MB||back,hips|
Downward Dog|MB||hamstrings,calves,shoulders|
Box Breathing|MB||breathing|
Band Pull-apart|MB|band|rear delts,upper back|
Cossack Squat|MB||adductors,hips|
Jefferson Curl|MB|kettlebell|hamstrings,spine|
Scapular Pull-up|G|pull-up bar|lats,scapula|Scap Pull-up
Medicine Ball Slam|O|slam ball|full body|Slam Ball,Ball Slam
Wall Sit|O|wall|quads|
Dead Bug|O||core|
Bird Dog|O||core,lower back|
Shadow Boxing|O||shoulders,cardio|
"""

# The studio's own entries (organization_id set): equipment and spots of this gym.
_STUDIO_EXERCISES = """
Stairwell Run|MO||legs,cardio|Stairwell Sprint
Parking Lot Sled Push|S|sled|quads,glutes|Lot Push
Sandbag Over Shoulder|S|sandbag|glutes,back|SBOS
Rig Traverse|G|rig|grip,lats,core|Monkey Bars
"""

# Hebrew and Russian names of the global library, as Israeli and Russian-speaking coaches say them
# (transliterations where that is what they say): name|Hebrew aliases|Russian aliases. They are more
# aliases, after the English ones, so "סקוואט" and "приседания" find the squat lexically; migration
# 0009 appends them to the library's rows. No alias names two exercises.
_EXERCISE_NAMES_HE_RU = """
Back Squat|סקוואט,סקוואט אחורי,סקוואט עם מוט|приседания со штангой,приседания,присед
Front Squat|פרונט סקוואט,סקוואט קדמי|фронтальные приседания,фронтальный присед
Overhead Squat|אוברהד סקוואט,סקוואט מעל הראש|оверхед сквот,приседания со штангой над головой
Deadlift|דדליפט,הרמת מתים|становая тяга,становая
Sumo Deadlift|סומו דדליפט,דדליפט סומו|становая тяга сумо,сумо тяга
Sumo Deadlift High Pull|סומו דדליפט היי פול|тяга сумо к подбородку
Romanian Deadlift|דדליפט רומני,רומני|румынская тяга
Bench Press|לחיצת חזה,בנץ' פרס|жим лежа,жим штанги лежа
Strict Press|לחיצת כתפיים,לחיצה צבאית,סטריקט פרס|армейский жим,жим стоя,жим штанги над головой
Push Press|פוש פרס|жимовой швунг,пуш пресс
Push Jerk|פוש ג'רק|швунг толчковый,пуш джерк
Split Jerk|ספליט ג'רק|толчок в ножницы,сплит джерк
Clean|קלין,סקוואט קלין|взятие на грудь,взятие в сед
Power Clean|פאוור קלין|взятие на грудь в стойку,пауэр клин
Hang Clean|האנג קלין|взятие на грудь с виса
Hang Power Clean|האנג פאוור קלין|взятие на грудь в стойку с виса
Snatch|סנאץ',חטיפה|рывок,рывок в сед
Power Snatch|פאוור סנאץ'|рывок в стойку
Hang Snatch|האנג סנאץ'|рывок с виса
Hang Power Snatch|האנג פאוור סנאץ'|рывок в стойку с виса
Clean and Jerk|קלין אנד ג'רק,הנפה ודחיקה|толчок,толчок классический
Thruster|תראסטר,טראסטר|трастер,трастеры
Cluster|קלאסטר|кластер
Snatch Pull|סנאץ' פול,משיכת סנאץ'|рывковая тяга
Clean Pull|קלין פול,משיכת קלין|толчковая тяга
Snatch Balance|סנאץ' באלאנס|рывковый баланс
Muscle Snatch|מאסל סנאץ'|мышечный рывок
Good Morning|גוד מורנינג|гуд монинг,наклоны со штангой
Barbell Row|חתירה עם מוט,חתירה בהטיה|тяга штанги в наклоне
Barbell Lunge|לאנג' עם מוט,מכרעים עם מוט|выпады со штангой
Overhead Lunge|לאנג' מעל הראש,מכרעים עם משקל מעל הראש|выпады с весом над головой
Zercher Squat|זרכר סקוואט|приседания Зерхера
Pause Squat|סקוואט עם עצירה,פאוז סקוואט|приседания с паузой
Box Squat|בוקס סקוואט,סקוואט לארגז|приседания на ящик
Incline Bench Press|לחיצת חזה בשיפוע|жим на наклонной скамье
Close-grip Bench Press|לחיצת חזה באחיזה צרה|жим узким хватом
Hip Thrust|היפ טראסט,דחיקת אגן|ягодичный мост со штангой,хип траст
Shoulder-to-overhead|שולדר טו אוברהד|с плеч над головой
Ground-to-overhead|גראונד טו אוברהד|с пола над головой
Floor Press|פלור פרס,לחיצה מהרצפה|жим лежа на полу
Kettlebell Swing|סווינג,קטלבל סווינג|махи гирей,свинг гирей
Goblet Squat|גובלט סקוואט|гоблет приседания,приседания с гирей у груди
Turkish Get-up|טורקיש גט אפ,קימה טורקית|турецкий подъем
Kettlebell Snatch|סנאץ' קטלבל|рывок гири
Kettlebell Clean|קלין קטלבל|взятие гири на грудь
Kettlebell Deadlift|דדליפט קטלבל|становая тяга с гирей
Dumbbell Snatch|סנאץ' משקולת,סנאץ' דמבל|рывок гантели
Dumbbell Clean|קלין משקולות,קלין דמבלים|взятие гантелей на грудь
Dumbbell Thruster|תראסטר משקולות,תראסטר דמבלים|трастеры с гантелями
Dumbbell Push Press|פוש פרס משקולות|жимовой швунг с гантелями
Dumbbell Bench Press|לחיצת חזה במשקולות|жим гантелей лежа
Dumbbell Row|חתירה במשקולת|тяга гантели в наклоне
Devil Press|דביל פרס|девил пресс
Man Maker|מן מייקר|мэн мейкер
Dumbbell Walking Lunge|מכרעים בהליכה עם משקולות|выпады с гантелями в ходьбе
Dumbbell Box Step-up|עליות על ארגז עם משקולות|зашагивания на ящик с гантелями
Dumbbell Hang Clean and Jerk|האנג קלין אנד ג'רק משקולת|взятие и толчок гантели с виса
Dumbbell Overhead Squat|אוברהד סקוואט משקולת|приседания с гантелью над головой
Bulgarian Split Squat|סקוואט בולגרי|болгарские выпады,болгарские приседания
Single-leg Romanian Deadlift|דדליפט רומני על רגל אחת|румынская тяга на одной ноге
Dumbbell Curl|כפיפת מרפקים,יד קדמית|сгибания рук с гантелями,подъем гантелей на бицепс
Triceps Extension|פשיטת מרפקים,יד אחורית|французский жим,разгибания на трицепс
Lateral Raise|הרחקת כתפיים,הרחקה לצדדים|махи гантелями в стороны
Wall Ball|וול בול,זריקת כדור לקיר|уолл болл,броски мяча в мишень
Medicine Ball Clean|קלין כדור כוח|взятие медбола на грудь
Pull-up|מתח,עליות מתח|подтягивания
Strict Pull-up|מתח סטריקט,מתח נקי|строгие подтягивания
Chest-to-bar Pull-up|מתח חזה למוט|подтягивания до груди
Butterfly Pull-up|מתח באטרפליי|подтягивания баттерфляем
Chin-up|מתח באחיזה הפוכה|подтягивания обратным хватом
Bar Muscle-up|מאסל אפ על מוט,בר מאסל אפ|выход силой на перекладине
Muscle-up|מאסל אפ,מאסל אפ בטבעות|выход силой,выход силой на кольцах
Toes-to-bar|טואו טו בר,רגליים למוט|носки к перекладине
Knees-to-elbows|ברכיים למרפקים|колени к локтям
Hanging Knee Raise|הרמת ברכיים בתלייה|подъем коленей в висе
Handstand Push-up|שכיבות סמיכה בעמידת ידיים,הנדסטנד פוש אפ|отжимания в стойке на руках
Strict Handstand Push-up|שכיבות סמיכה בעמידת ידיים סטריקט|строгие отжимания в стойке на руках
Handstand Walk|הליכת ידיים|ходьба на руках
Handstand Hold|עמידת ידיים|стойка на руках
Wall Walk|וול ווק,הליכה על הקיר|подъем по стене
Push-up|שכיבות סמיכה|отжимания
Hand-release Push-up|שכיבות סמיכה עם הרמת ידיים|отжимания с отрывом рук
Ring Dip|מקבילים בטבעות|отжимания на кольцах
Bar Dip|מקבילים|отжимания на брусьях,брусья
Burpee|ברפי,בורפי|берпи
Burpee Box Jump-over|ברפי קפיצה מעל ארגז|берпи с перепрыгиванием через ящик
Bar-facing Burpee|ברפי מעל מוט|берпи через штангу
Burpee Pull-up|ברפי מתח|берпи с подтягиванием
Box Jump|קפיצה לארגז,בוקס ג'אמפ|запрыгивания на ящик
Box Jump-over|קפיצה מעל ארגז|перепрыгивания через ящик
Box Step-up|עלייה על ארגז|зашагивания на ящик
Air Squat|סקוואט חופשי,סקוואט משקל גוף|приседания без веса,воздушные приседания
Pistol|פיסטול,סקוואט על רגל אחת|пистолетик,приседания на одной ноге
Lunge|מכרעים,לאנג'|выпады
Walking Lunge|מכרעים בהליכה|выпады в ходьбе
Jumping Lunge|מכרעים בקפיצה|выпады в прыжке
Sit-up|כפיפות בטן|подъем корпуса,скручивания
GHD Sit-up|כפיפות בטן על GHD|подъем корпуса на GHD
GHD Hip Extension|פשיטת גב,היפר אקסטנשן|гиперэкстензия
V-up|וי אפ|складка
Hollow Hold|הולו הולד,החזקת סירה|лодочка
Hollow Rock|הולו רוק,נדנוד סירה|качалка в лодочке
Superman Hold|סופרמן|супермен
L-sit|אל סיט,ישיבת L|уголок
Plank|פלאנק|планка
Side Plank|פלאנק צד,פלאנק צידי|боковая планка
Rope Climb|טיפוס חבל|лазание по канату
Legless Rope Climb|טיפוס חבל בלי רגליים|лазание по канату без ног
Ring Row|חתירה בטבעות|тяга на кольцах
Inverted Row|מתח אוסטרלי|австралийские подтягивания
Tuck Jump|קפיצת ברכיים לחזה|прыжки с подтягиванием коленей
Broad Jump|קפיצה לרוחק|прыжок в длину с места
Mountain Climber|מטפס הרים|скалолаз
Jumping Jack|ג'אמפינג ג'ק,קפיצות פיסוק|джампинг джек
Bear Crawl|זחילת דוב,הליכת דוב|медвежья походка
Inchworm|תולעת|гусеница
Glute Bridge|גשר ישבן,גשר עכוז|ягодичный мостик
Skin the Cat|סקין דה קאט|выкрут на кольцах
Kipping Swing|קיפינג,נדנוד קיפינג|киппинг
Run|ריצה|бег
Sprint|ספרינט|спринт
Shuttle Run|ריצה הלוך חזור,ריצת מעבורת|челночный бег
Row|חתירה,מכונת חתירה|гребля,гребной тренажер
Bike|אופני אוויר,אסולט בייק|эйрбайк,велосипед
Ski Erg|סקי ארג|лыжный тренажер
Bike Erg|בייק ארג|велоэргометр
Double-under|דאבל אנדר,דאבלים,קפיצות כפולות|двойные прыжки,двойные прыжки на скакалке
Single-under|קפיצה בחבל,סינגלים|прыжки на скакалке,одинарные прыжки
Swim|שחייה|плавание
Ruck|מסע עם משקל|марш с рюкзаком
Stair Climb|עליית מדרגות,מדרגות|подъем по лестнице
Farmer's Carry|הליכת חקלאי,פארמר ווק|прогулка фермера
Sled Push|דחיפת מזחלת|толкание саней
Sled Pull|משיכת מזחלת|тяга саней
Sandbag Carry|נשיאת שק חול|перенос мешка с песком
Sandbag Clean|קלין שק חול|взятие мешка с песком на плечо
Yoke Carry|נשיאת יוק|переноска ярма
Atlas Stone|אבן אטלס|камни атласа
Tire Flip|היפוך צמיג|переворот покрышки,кантовка покрышки
Overhead Carry|נשיאה מעל הראש,הליכת מלצר|переноска над головой,прогулка официанта
Suitcase Carry|נשיאת מזוודה|прогулка с чемоданом
Front Rack Carry|נשיאה בפרונט ראק|переноска в фронтальной позиции
Battle Rope|חבלי קרב|боевые канаты,канаты
D-ball Over Shoulder|כדור מעל הכתף|мяч через плечо
PVC Pass-through|העברת מקל|выкруты с палкой
Couch Stretch|מתיחת ספה|растяжка квадрицепса у стены
Pigeon Pose|תנוחת היונה|поза голубя
World's Greatest Stretch|המתיחה הטובה בעולם|лучшая растяжка в мире
Thoracic Rotation|סיבובי גב עליון,רוטציה תורקלית|ротация грудного отдела
Cat-Cow|חתול פרה|кошка-корова
Hip 90/90|ירכיים 90/90|тазобедренные 90/90
Foam Rolling|גליל עיסוי,פום רולר|МФР,раскатка роллом
Banded Shoulder Distraction|מתיחת כתף עם גומייה|мобилизация плеча с резинкой
Deep Squat Hold|החזקת סקוואט עמוק|удержание глубокого приседа
Child's Pose|תנוחת הילד|поза ребенка
Downward Dog|כלב מביט מטה|собака мордой вниз
Box Breathing|נשימת קופסה|квадратное дыхание
Band Pull-apart|פתיחת גומייה לצדדים|разведение резинки
Cossack Squat|סקוואט קוזאקי|казачьи приседания
Jefferson Curl|ג'פרסון קרל|скручивание Джефферсона
Scapular Pull-up|מתח שכמות|лопаточные подтягивания
Medicine Ball Slam|סלאם בול,הטחת כדור|броски мяча об пол,слэмбол
Wall Sit|כיסא קיר,ישיבה על הקיר|стульчик у стены
Dead Bug|דד באג,חיפושית מתה|мертвый жук
Bird Dog|בירד דוג,ציפור כלב|птица-собака
Shadow Boxing|אגרוף צללים|бой с тенью
"""

_MODALITY = {"W": W, "G": G, "MO": MO, "S": S, "MB": MB, "O": O}


@dataclass(frozen=True)
class Exercise:
    name: str
    modality: str
    equipment: tuple[str, ...]
    muscles: tuple[str, ...]
    aliases: tuple[str, ...]


def _parse_exercises(text: str) -> list[Exercise]:
    def split(s: str) -> tuple[str, ...]:
        return tuple(p.strip() for p in s.split(",") if p.strip())

    out = []
    for line in text.strip().splitlines():
        name, modality, equipment, muscles, aliases = line.split("|")
        out.append(Exercise(name, _MODALITY[modality], split(equipment), split(muscles), split(aliases)))
    return out


def _local_names(text: str) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    def split(s: str) -> tuple[str, ...]:
        return tuple(p.strip() for p in s.split(",") if p.strip())

    out = {}
    for line in text.strip().splitlines():
        name, hebrew, russian = line.split("|")
        out[name] = (split(hebrew), split(russian))
    return out


# Exercise name → (Hebrew aliases, Russian aliases), every library exercise having at least one of each.
EXERCISE_NAMES_HE_RU = _local_names(_EXERCISE_NAMES_HE_RU)
EXERCISES = [
    replace(e, aliases=e.aliases + EXERCISE_NAMES_HE_RU[e.name][0] + EXERCISE_NAMES_HE_RU[e.name][1])
    for e in _parse_exercises(_EXERCISES)
]
STUDIO_EXERCISES = _parse_exercises(_STUDIO_EXERCISES)

# ---------------------------------------------------------------------------------------------------
# Plans, programs, class types, the weekly timetable.


@dataclass(frozen=True)
class PlanSpec:
    name: str
    price_cents: int
    interval: str  # month | year | once
    sessions_per_week: int | None
    visits_per_week: float  # how often its members come, on average
    weight: float  # share of new members choosing it
    active: bool = True


PLANS = [
    PlanSpec("Unlimited", 18900, "month", None, 3.4, 0.28),
    PlanSpec("3x/week", 14900, "month", 3, 2.6, 0.24),
    PlanSpec("2x/week", 11900, "month", 2, 1.8, 0.10),
    PlanSpec("8 per month", 12900, "month", 2, 1.7, 0.12),
    PlanSpec("10-class pass", 18000, "once", None, 0.9, 0.07),
    PlanSpec("Drop-in", 2500, "once", None, 0.3, 0.04),
    PlanSpec("Annual", 189000, "year", None, 3.0, 0.10),
    PlanSpec("Personal training", 32000, "month", 1, 1.2, 0.05),
    PlanSpec("Founders Unlimited", 14900, "month", None, 3.4, 0.0, active=False),
]
PLAN_BY_NAME = {p.name: p for p in PLANS}

# (name, kind, description)
PROGRAMS = [
    ("CrossFit", "group", "Daily group WODs: strength, gymnastics and metcons, scaled for every level."),
    ("Open Gym", "group", "Unstructured training time with equipment available and a coach on the floor."),
    ("Olympic Weightlifting", "group", "Snatch and clean & jerk technique, three sessions a week with a coach."),
    ("Mobility & Recovery", "group", "Stretching, breathing and soft-tissue work to recover between hard days."),
    ("Coaching", "coaching", "Remote coaching: a weekday plan, logged results and comments answered by your coach."),
    ("Personal Coaching", "coaching", "One-on-one programming and weekly check-ins with your own coach."),
    ("Home Workouts", "feed", "A daily feed of 30-minute workouts for members training away from the box."),
]

# (name, program, capacity, minutes, description)
CLASS_TYPES = [
    ("WOD", "CrossFit", 16, 60, "The daily CrossFit class: warm-up, strength and a metcon."),
    ("Foundations", "CrossFit", 8, 60, "Small-group intro to the fundamental movements for new members."),
    ("Open Gym", "Open Gym", 20, 60, "Train on your own with a coach on the floor."),
    ("Olympic Lifting", "Olympic Weightlifting", 10, 60, "Snatch and clean & jerk technique and strength."),
    ("Mobility", "Mobility & Recovery", 14, 45, "Guided stretching and breathing."),
]

# Weekly timetable in the studio's local time: (weekdays (Mon=0), "HH:MM", class type, coach slot, demand).
# Demand scales how many members pick the slot: early mornings and evenings fill, mid-day does not.
_WEEKDAYS = (0, 1, 2, 3, 4)
TIMETABLE = [
    (_WEEKDAYS, "06:00", "WOD", 0, 0.9),
    (_WEEKDAYS, "07:00", "WOD", 1, 1.3),
    (_WEEKDAYS, "09:00", "WOD", 2, 0.5),
    (_WEEKDAYS, "10:00", "Open Gym", 3, 0.35),
    (_WEEKDAYS, "12:00", "WOD", 2, 0.6),
    (_WEEKDAYS, "13:00", "Open Gym", 3, 0.4),
    (_WEEKDAYS, "17:00", "WOD", 0, 1.0),
    (_WEEKDAYS, "18:00", "WOD", 1, 1.6),
    (_WEEKDAYS, "19:00", "WOD", 3, 1.3),
    ((1, 3), "18:00", "Foundations", 2, 0.5),
    ((0, 2, 4), "20:00", "Olympic Lifting", 0, 0.6),
    ((1, 3), "20:00", "Mobility", 3, 0.45),
    ((5,), "08:00", "WOD", 1, 0.9),
    ((5,), "09:30", "WOD", 0, 1.1),
    ((5,), "11:00", "Open Gym", 2, 0.5),
    ((6,), "09:00", "WOD", 3, 0.9),
    ((6,), "10:30", "Mobility", 2, 0.6),
]
BANDS = {
    "morning": ("06:00", "07:00"),
    "midday": ("09:00", "10:00", "12:00", "13:00"),
    "evening": ("17:00", "18:00", "19:00", "20:00"),
}

COACHES = [("Ayelet Stern", "ayelet.stern"), ("Guy Peled", "guy.peled"), ("Noam Avidan", "noam.avidan")]

FIRST_NAMES = (
    "Noa Tamar Yael Shira Michal Maya Roni Adi Gal Hila Liat Inbar Keren Chen Talia Yarden Ella Lihi Neta Sivan "
    "Omer Itai Yonatan Daniel Eitan Nadav Ido Amit Ori Alon Ariel Yuval Matan Tomer Roei Elad Asaf Ofir Guy Erez "
    "Anna Sophie Emma Olivia Lucia Elena Hannah Sara Julia Laura Alex Lucas James Ben David Leo Max Marco Ivan Noah"
).split()
LAST_NAMES = (
    "Cohen Levi Mizrahi Peretz Biton Dahan Avraham Friedman Azoulay Katz Yosef David Amar Ohana Hadad Gabay Ben-David "
    "Shalom Malka Vaknin Golan Shapiro Segal Klein Rosen Weiss Navon Barak Harari Sasson Elbaz Tal Mor Ashkenazi Kaplan "
    "Stein Berger Carmi Ziv Lavi Nachum Sharabi Dror Regev Oren Almog Gilad Ronen Adler Meir Baron Hoffman Novak Costa "
    "Rossi Silva Martin Garcia Muller"
).split()
EXCLUDED_FIRST = {"Saar", "Dani"}  # the demo's two Saars and one Dani stay unambiguous in their own way

DANI = ("Dani Rubin", "dani.rubin", "Personal training", "due")

# ---------------------------------------------------------------------------------------------------
# Workouts.

# (lift, scheme, reps, load kg)
STRENGTH = [
    ("Back Squat", "5x5", 5, 80), ("Front Squat", "5x3", 3, 70), ("Deadlift", "5x3", 3, 120),
    ("Strict Press", "5x5", 5, 40), ("Bench Press", "5x5", 5, 60), ("Push Press", "5x3", 3, 55),
    ("Power Clean", "EMOM 10", 2, 70), ("Power Snatch", "EMOM 10", 2, 50), ("Clean and Jerk", "EMOM 12", 1, 75),
    ("Overhead Squat", "5x3", 3, 50), ("Push Jerk", "5x2", 2, 65), ("Sumo Deadlift", "4x6", 6, 100),
]
# (movement, reps, distance m, duration s, load kg)
METCON_MOVES = [
    ("Run", None, 400, None, None), ("Row", None, 500, None, None), ("Bike", None, None, 60, None),
    ("Ski Erg", None, 250, None, None), ("Double-under", 40, None, None, None), ("Burpee", 12, None, None, None),
    ("Box Jump", 15, None, None, None), ("Wall Ball", 20, None, None, 9), ("Kettlebell Swing", 20, None, None, 24),
    ("Pull-up", 12, None, None, None), ("Chest-to-bar Pull-up", 10, None, None, None), ("Toes-to-bar", 12, None, None, None),
    ("Push-up", 15, None, None, None), ("Handstand Push-up", 8, None, None, None), ("Air Squat", 25, None, None, None),
    ("Thruster", 12, None, None, 43), ("Power Clean", 10, None, None, 60), ("Dumbbell Snatch", 16, None, None, 22.5),
    ("Lunge", 20, None, None, None), ("Sit-up", 20, None, None, None), ("GHD Sit-up", 15, None, None, None),
    ("Rope Climb", 3, None, None, None), ("Muscle-up", 5, None, None, None), ("Sumo Deadlift High Pull", 15, None, None, 35),
    ("Single-under", 100, None, None, None), ("Plank", None, None, 45, None), ("Deadlift", 10, None, None, 100),
]
METCON_FORMATS = ["AMRAP 12", "AMRAP 15", "AMRAP 20", "For time", "5 rounds for time", "3 rounds for time", "EMOM 16",
                  "21-15-9 for time", "Every 3:00 x 5", "Chipper"]
BENCHMARKS = {
    "Fran": ("21-15-9 for time", [("Thruster", None, None, None, 43), ("Pull-up", None, None, None, None)]),
    "Grace": ("For time", [("Clean and Jerk", 30, None, None, 61)]),
    "Helen": ("3 rounds for time", [("Run", None, 400, None, None), ("Kettlebell Swing", 21, None, None, 24),
                                   ("Pull-up", 12, None, None, None)]),
    "Cindy": ("AMRAP 20", [("Pull-up", 5, None, None, None), ("Push-up", 10, None, None, None), ("Air Squat", 15, None, None, None)]),
    "Diane": ("21-15-9 for time", [("Deadlift", None, None, None, 102), ("Handstand Push-up", None, None, None, None)]),
    "Karen": ("For time", [("Wall Ball", 150, None, None, 9)]),
    "Annie": ("50-40-30-20-10 for time", [("Double-under", None, None, None, None), ("Sit-up", None, None, None, None)]),
    "Jackie": ("For time", [("Row", None, 1000, None, None), ("Thruster", 50, None, None, 20), ("Pull-up", 30, None, None, None)]),
    "DT": ("5 rounds for time", [("Deadlift", 12, None, None, 70), ("Hang Power Clean", 9, None, None, 70), ("Push Jerk", 6, None, None, 70)]),
    "Isabel": ("For time", [("Snatch", 30, None, None, 61)]),
}
MURPH = ("For time", [("Run", None, 1600, None, None), ("Pull-up", 100, None, None, None), ("Push-up", 200, None, None, None),
                      ("Air Squat", 300, None, None, None), ("Run", None, 1600, None, None)])
OLY = [
    ("Snatch technique", [("Warm-up", "2 rounds", [("PVC Pass-through", 10, None, None, None), ("Overhead Squat", 5, None, None, 20)]),
                          ("Snatch", "EMOM 12", [("Hang Snatch", 1, None, None, 45), ("Snatch", 1, None, None, 50)])]),
    ("Clean & jerk day", [("Warm-up", "2 rounds", [("Front Squat", 5, None, None, 40), ("Push Jerk", 3, None, None, 40)]),
                          ("Clean and Jerk", "Every 2:00 x 8", [("Clean", 1, None, None, 70), ("Split Jerk", 1, None, None, 70)])]),
    ("Pulls and squats", [("Pulls", "5x3", [("Snatch Pull", 3, None, None, 70)]), ("Squat", "5x3", [("Front Squat", 3, None, None, 80)])]),
]
HOME = [("Row", None, None, None, None), ("Burpee", 10, None, None, None), ("Walking Lunge", 20, None, None, None),
        ("Push-up", 15, None, None, None), ("Plank", None, None, 60, None), ("Air Squat", 30, None, None, None),
        ("V-up", 15, None, None, None), ("Mountain Climber", 40, None, None, None), ("Glute Bridge", 20, None, None, None)]

MEMBER_COMMENTS = [
    "Done! {score}. Legs are toast.", "Scaled to {scale} today, felt good.", "{score} — a PR for me!",
    "Shoulder felt tight on the overhead part, went lighter.", "Missed the last round, finished at {score}.",
    "Did this at home with dumbbells, {score}.", "Question: can I swap the run for the rower?",
    "Took it easy today, still recovering from the weekend.", "Loved this one. {score}.",
    "Hard one. Broke the pull-ups into sets of 3.", "Knee was sore on the lunges, should I keep going?",
    "{score}, RX for the first time!",
]
COACH_REPLIES = [
    "Great work — keep the pace even next time.", "Yes, swap it 1:1 on the rower (500 m per 400 m).",
    "Nice PR! Log it so we can build on it.", "Go lighter and keep the range of motion; let's look at it Thursday.",
    "Good call to scale. Recovery counts as training.", "Let's talk knees on Thursday — skip lunges until then.",
]
YEAR_TASKS = [
    ("Follow up with members who have not visited in three weeks", "coach", "open", 2, "Use the at-risk list; a short call or message."),
    ("Chase failed card payments", "admin", "open", 3, "Retry the cards and message members whose payment failed."),
    ("Renew the PAR-Q for members whose form expired", "admin", "open", 10, None),
    ("Schedule the next Foundations intake", "coach", "open", 14, "Eight places; new members first."),
    ("Replace the worn pull-up bar grips", "coach", "open", 21, None),
    ("Plan the holiday timetable", "owner", "open", 25, None),
    ("Post the Murph results on the board", "coach", "done", -150, None),
    ("Service the rowers and bikes", "coach", "done", -120, None),
    ("Run the member satisfaction survey", "owner", "done", -90, None),
    ("Order chalk and tape", "coach", "done", -60, None),
    ("Update the class prices on the website", "admin", "done", -45, None),
    ("Book the first-aid refresher for coaches", "owner", "done", -30, None),
]
FORMS = [("waiver", "Liability waiver", True, None), ("par_q", "PAR-Q health questionnaire", True, 365),
         ("health_update", "Quarterly health update", False, 90)]

TEMPLATES = [
    ("Beginner Foundations (4 weeks)", "group", "Three sessions a week introducing the squat, hinge, press and pull.", 4, 3),
    ("Home Strength (3 weeks)", "feed", "Dumbbell and bodyweight strength for members training at home.", 3, 4),
]


@dataclass(frozen=True)
class YearSummary:
    members: int
    active_members: int
    cancelled_members: int
    paused_members: int
    plans: int
    member_plans: int
    payments: int
    payments_paid_cents: int
    class_types: int
    class_sessions: int
    cancelled_sessions: int
    bookings: int
    attended: int
    workouts: int
    workout_movements: int
    linked_movements: int
    comments: int
    comment_reads: int
    assignments: int
    published_assignments: int
    tasks: int
    templates: int
    template_workouts: int
    form_assignments: int
    global_exercises: int
    studio_exercises: int


# ---------------------------------------------------------------------------------------------------
# Members: the existing ones as they are, new ones drawn.


@dataclass
class Member:
    key: str
    membership_id: str
    full_name: str
    email: str
    joined: date
    status: str
    plan: str | None
    payment: str
    ended_on: date | None = None
    last_active: date | None = None  # the last day they came (None: never came)
    previous_plan: tuple[str, date] | None = None  # (plan, switched on)
    new: bool = False
    visits: list[date] = field(default_factory=list)


def _rng(*key: object) -> random.Random:
    return random.Random(":".join(str(k) for k in (SEED, *key)))


def _draw_member(rng: random.Random, today: date, year_start: date, full_name: str, local: str, domain: str) -> Member:
    if rng.random() < 0.5:
        joined = today - timedelta(days=rng.randint(366, 1100))
    else:
        while True:  # joins pick up over the year (density from 1 to 2): the studio grows
            t = rng.random()
            if rng.random() < (1 + t) / 2:
                break
        joined = year_start + timedelta(days=int(365 * t))
    joined = min(joined, today)
    plan = rng.choices([p.name for p in PLANS], weights=[p.weight for p in PLANS])[0]
    tenure = (today - joined).days
    m = Member(key=local, membership_id=str(uuid.uuid4()), full_name=full_name, email=f"{local}@{domain}",
               joined=joined, status="active", plan=plan, payment="none", new=True)
    churn = 0.35 if tenure > 365 else 0.22
    earliest = max(joined + timedelta(days=40), year_start - timedelta(days=90))
    if rng.random() < churn and earliest < today - timedelta(days=2):
        ended = earliest + timedelta(days=rng.randint(0, (today - timedelta(days=2) - earliest).days))
        if ended < today - timedelta(days=1):
            m.status, m.ended_on = "cancelled", ended
            m.last_active = ended - timedelta(days=rng.randint(0, 20))
    if m.status == "active":
        if tenure <= 10 and rng.random() < 0.5:
            m.status = "pending"
        elif tenure > 60 and rng.random() < 0.06:
            m.status, m.last_active = "paused", today - timedelta(days=rng.randint(20, 90))
        elif tenure > 60 and rng.random() < 0.11:
            m.last_active = today - timedelta(days=rng.randint(15, 45))  # at risk: stopped coming
        else:
            m.last_active = today - timedelta(days=rng.randint(1, 6))
    on_plan = ((m.ended_on or today) - joined).days
    if on_plan > 150 and rng.random() < 0.25 and m.plan in ("Unlimited", "3x/week", "Annual", "2x/week"):
        before = ("Founders Unlimited" if joined < year_start - timedelta(days=200)
                  else rng.choice(["8 per month", "2x/week", "10-class pass"]))
        if before != m.plan:
            m.previous_plan = (before, joined + timedelta(days=rng.randint(60, on_plan - 60)))
    if m.last_active is not None and m.last_active < joined:
        m.last_active = joined
    return m


# ---------------------------------------------------------------------------------------------------


async def seed_demo_year(conn: asyncpg.Connection, org_id: str, today: date) -> YearSummary:
    """Fill `org_id` with a studio year ending on `today` (idempotent; see the module docstring).
    Runs inside the caller's transaction when there is one."""
    org = uuid.UUID(str(org_id))
    async with conn.transaction():
        # Check-then-write: a second seeder of the same studio waits here, then finds the year.
        await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2::text))", _YEAR_LOCK, str(org))
        if not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM payments WHERE organization_id = $1)", org):
            await _Year(conn, org, today).build()
    return await year_summary(conn, org)


class _Year:
    def __init__(self, conn: asyncpg.Connection, org: uuid.UUID, today: date) -> None:
        self.conn, self.org, self.today = conn, org, today
        self.year_start = today - timedelta(days=365)

    # --- helpers -----------------------------------------------------------------------------------

    def done(self, moment: datetime) -> datetime:
        """A moment of something already done: never later than the start of `today`."""
        return min(moment, self.at(self.today, "00:00") - timedelta(minutes=1))

    def at(self, day: date, hhmm: str | time, minutes: int = 0) -> datetime:
        t = hhmm if isinstance(hhmm, time) else time(*map(int, hhmm.split(":")))
        local = datetime.combine(day, t, tzinfo=self.tz) + timedelta(minutes=minutes)
        return local.astimezone(UTC)

    async def build(self) -> None:
        row = await self.conn.fetchrow("SELECT slug, timezone FROM organizations WHERE id = $1", self.org)
        self.tz = ZoneInfo(row["timezone"])
        self.domain = row["slug"].replace("-", ".")
        self.owner_user = await self.conn.fetchval(
            "SELECT user_id FROM memberships WHERE organization_id = $1 AND role = 'owner' ORDER BY created_at LIMIT 1", self.org
        )
        await self.exercises()
        await self.plans()
        await self.programs()
        await self.people()
        await self.class_types()
        self.sessions()
        self.attendance()
        await self.write_memberships_and_money()
        await self.write_sessions_and_bookings()
        await self.workouts()
        await self.coaching_comments()
        await self.assignments()
        await self.tasks()
        await self.templates()
        await self.forms()

    # --- library, plans, programs ------------------------------------------------------------------

    async def exercises(self) -> None:
        await self.conn.execute(
            """INSERT INTO exercises (organization_id, name, modality, equipment, muscles, aliases)
               SELECT NULL, e.name, e.modality::exercise_modality, string_to_array(e.equipment, ','),
                      string_to_array(e.muscles, ','), string_to_array(e.aliases, ',')
               FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
                    AS e(name, modality, equipment, muscles, aliases)
               ON CONFLICT (coalesce(organization_id, '00000000-0000-0000-0000-000000000000'::uuid), lower(name))
                  WHERE deleted_at IS NULL DO NOTHING""",
            *_columns(EXERCISES),
        )
        await self.conn.execute(
            """INSERT INTO exercises (organization_id, name, modality, equipment, muscles, aliases)
               SELECT $6, e.name, e.modality::exercise_modality, string_to_array(e.equipment, ','),
                      string_to_array(e.muscles, ','), string_to_array(e.aliases, ',')
               FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
                    AS e(name, modality, equipment, muscles, aliases)
               ON CONFLICT (coalesce(organization_id, '00000000-0000-0000-0000-000000000000'::uuid), lower(name))
                  WHERE deleted_at IS NULL DO NOTHING""",
            *_columns(STUDIO_EXERCISES), self.org,
        )
        # Movement name → exercise: the studio's own entries first, then the global library; names and aliases.
        rows = await self.conn.fetch(
            """SELECT id, name, aliases, organization_id IS NOT NULL AS own FROM exercises
               WHERE (organization_id IS NULL OR organization_id = $1) AND deleted_at IS NULL
               ORDER BY own, name""",
            self.org,
        )
        self.exercise_ids: dict[str, uuid.UUID] = {}
        for r in rows:  # names win over aliases; the studio's entries over the global ones
            for alias in r["aliases"]:
                self.exercise_ids.setdefault(alias.lower(), r["id"])
        for r in rows:
            self.exercise_ids[r["name"].lower()] = r["id"]

    async def plans(self) -> None:
        await self.conn.execute(
            """INSERT INTO plans (organization_id, name, price_cents, billing_interval, sessions_per_week, is_active, created_at)
               SELECT $1, p.name, p.price, p.interval::plan_interval, p.spw, p.active, $7
               FROM unnest($2::text[], $3::int[], $4::text[], $5::int[], $6::bool[]) AS p(name, price, interval, spw, active)
               ON CONFLICT (organization_id, name) DO NOTHING""",
            self.org, [p.name for p in PLANS], [p.price_cents for p in PLANS], [p.interval for p in PLANS],
            [p.sessions_per_week for p in PLANS], [p.active for p in PLANS], self.at(self.today - timedelta(days=1100), "09:00"),
        )
        rows = await self.conn.fetch("SELECT id, name FROM plans WHERE organization_id = $1", self.org)
        self.plan_ids = {r["name"]: r["id"] for r in rows}

    async def programs(self) -> None:
        self.program_ids: dict[str, uuid.UUID] = {}
        for name, kind, description in PROGRAMS:
            found = await self.conn.fetchval(
                "SELECT id FROM programs WHERE organization_id = $1 AND name = $2 AND deleted_at IS NULL", self.org, name
            )
            if found is None:
                found = await self.conn.fetchval(
                    "INSERT INTO programs (organization_id, name, description, kind) VALUES ($1, $2, $3, $4) RETURNING id",
                    self.org, name, description, kind,
                )
            self.program_ids[name] = found

    # --- people ------------------------------------------------------------------------------------

    async def people(self) -> None:
        rows = await self.conn.fetch(
            """SELECT m.id, m.role::text, m.status::text, m.plan, m.payment_status::text, m.joined_at, m.ended_on,
                      m.last_visit_at, u.full_name, u.email
               FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.organization_id = $1
               ORDER BY m.joined_at, u.full_name""",
            self.org,
        )
        existing_names = {r["full_name"].lower() for r in rows}
        self.members: list[Member] = []
        for r in rows:
            if r["role"] != "member":
                continue
            last = r["last_visit_at"].astimezone(self.tz).date() if r["last_visit_at"] else None
            m = Member(key=r["full_name"], membership_id=str(r["id"]), full_name=r["full_name"], email=r["email"],
                       joined=r["joined_at"], status=r["status"], plan=r["plan"], payment=r["payment_status"],
                       ended_on=r["ended_on"], last_active=min(last, self.today) if last else None)
            if m.status == "cancelled" and m.ended_on is None:
                m.ended_on = max(m.joined, min(self.today - timedelta(days=1), (last or m.joined) + timedelta(days=14)))
            if m.plan not in PLAN_BY_NAME:
                m.plan = None
            self.members.append(m)

        rng = _rng("roster", self.today)
        names = [(f, last_name) for f in FIRST_NAMES for last_name in LAST_NAMES if f not in EXCLUDED_FIRST]
        rng.shuffle(names)
        drawn = 0
        for first, last_name in names:
            if drawn == MEMBERS_GENERATED:
                break
            full = f"{first} {last_name}"
            if full.lower() in existing_names:
                continue
            local = f"{first}.{last_name}".lower().replace("-", "")
            rng_member = _rng("member", local, self.today)
            self.members.append(_draw_member(rng_member, self.today, self.year_start, full, local, self.domain))
            drawn += 1
        name, local, plan, payment = DANI
        dani = Member(key=local, membership_id=str(uuid.uuid4()), full_name=name, email=f"{local}@{self.domain}",
                      joined=self.today - timedelta(days=240), status="active", plan=plan, payment=payment,
                      last_active=self.today - timedelta(days=1), new=True)
        if name.lower() not in existing_names:
            self.members.append(dani)
        self.dani = next(m for m in self.members if m.full_name == name)

        # Coaches: the studio's own, then the demo's three.
        coach_rows = [r for r in rows if r["role"] == "coach"]
        new_coaches = [(n, f"{loc}@{self.domain}") for n, loc in COACHES if n.lower() not in existing_names]
        users = await self._users([e for _, e in new_coaches], [n for n, _ in new_coaches])
        ids = [str(uuid.uuid4()) for _ in new_coaches]
        await self.conn.execute(
            """INSERT INTO memberships (id, organization_id, user_id, role, status, payment_status, joined_at, last_visit_at, phone)
               SELECT c.id, $1, c.user_id, 'coach', 'active', 'none', $4, $5, c.phone
               FROM unnest($2::uuid[], $3::uuid[], $6::text[]) AS c(id, user_id, phone)
               ON CONFLICT (organization_id, user_id) DO NOTHING""",
            self.org, ids, [users[e] for _, e in new_coaches], self.today - timedelta(days=900),
            self.at(self.today - timedelta(days=1), "20:00"), [f"+972-54-{3100000 + i * 4111:07d}" for i in range(len(ids))],
        )
        self.coach_ids = [r["id"] for r in coach_rows] + [uuid.UUID(i) for i in ids]
        self.head_coach = self.coach_ids[0]

    async def _users(self, emails: list[str], names: list[str]) -> dict[str, uuid.UUID]:
        rows = await self.conn.fetch(
            """INSERT INTO users (email, full_name) SELECT * FROM unnest($1::text[], $2::text[])
               ON CONFLICT (lower(email)) DO UPDATE SET full_name = excluded.full_name RETURNING id, email""",
            emails, names,
        )
        return {r["email"]: r["id"] for r in rows}

    # --- timetable and attendance ------------------------------------------------------------------

    async def class_types(self) -> None:
        for name, program, capacity, minutes, description in CLASS_TYPES:
            await self.conn.execute(
                """INSERT INTO class_types (organization_id, program_id, name, description, default_capacity, duration_min)
                   SELECT $1, $2, $3::text, $4::text, $5::int, $6::int
                   WHERE NOT EXISTS (SELECT 1 FROM class_types WHERE organization_id = $1 AND lower(name) = lower($3)
                                     AND deleted_at IS NULL)""",
                self.org, self.program_ids[program], name, description, capacity, minutes,
            )
        rows = await self.conn.fetch(
            "SELECT id, name, default_capacity, duration_min FROM class_types WHERE organization_id = $1 AND deleted_at IS NULL",
            self.org,
        )
        self.types = {r["name"]: r for r in rows}

    def sessions(self) -> None:
        rng = _rng("sessions", self.today)
        self.by_day: dict[date, list[dict]] = defaultdict(list)
        day = self.year_start
        end = self.today + timedelta(days=7 * WEEKS_AHEAD)
        while day <= end:
            for weekdays, hhmm, type_name, coach_slot, demand in TIMETABLE:
                if day.weekday() not in weekdays:
                    continue
                ct = self.types[type_name]
                starts = self.at(day, hhmm)
                s = dict(id=uuid.uuid4(), day=day, hhmm=hhmm, type=ct["id"], type_name=type_name, starts=starts,
                         ends=starts + timedelta(minutes=ct["duration_min"]), capacity=ct["default_capacity"],
                         coach=self.coach_ids[coach_slot % len(self.coach_ids)], demand=demand, booked=0,
                         cancelled_at=None, reason=None)
                if rng.random() < 0.004 or (day > self.today and rng.random() < 0.003):
                    s["cancelled_at"] = self.done(starts - timedelta(hours=rng.randint(3, 30)))
                    s["reason"] = rng.choice(["Coach sick", "Maintenance on the rig", "Public holiday", "Power outage"])
                self.by_day[day].append(s)
            day += timedelta(days=1)

    def attendance(self) -> None:
        self.bookings: list[tuple] = []
        for m in self.members:
            rng = _rng("visits", m.key, self.today)
            plan = PLAN_BY_NAME.get(m.plan or "Drop-in")
            rate = plan.visits_per_week * rng.uniform(0.6, 1.3) if m.status != "pending" else 0
            band = rng.choices(list(BANDS), weights=[0.35, 0.15, 0.5])[0]
            start = max(m.joined, self.year_start)
            stop = m.last_active if m.last_active is not None else None
            if m.ended_on is not None:
                stop = min(stop or m.ended_on, m.ended_on)
            day = start
            future = m.status == "active" and (m.last_active or date.min) >= self.today - timedelta(days=7)
            horizon = self.today + timedelta(days=7 * WEEKS_AHEAD)
            while day <= horizon and rate:
                if day >= self.today:
                    if not future:
                        break
                    p = rate / 7 * max(0.0, 1 - (day - self.today).days / 10)
                else:
                    if stop is None or day > stop:
                        if not future:
                            break
                        day = self.today  # came lately, and has booked the days ahead
                        continue
                    p = rate / 7 * (1.45 if day.weekday() < 5 else 0.75)
                forced = day == stop and day < self.today
                if forced or rng.random() < p:
                    self._book(rng, m, day, band, forced)
                day += timedelta(days=1)

    def _book(self, rng: random.Random, m: Member, day: date, band: str, forced: bool) -> None:
        options = self.by_day.get(day, [])
        if not options:
            return
        weights = [s["demand"] * (3 if s["hhmm"] in BANDS[band] else 0.4) * (0.6 if s["type_name"] == "Foundations" else 1)
                   for s in options]
        s = rng.choices(options, weights=weights)[0]
        past = day < self.today
        booked_at = s["starts"] - timedelta(hours=rng.randint(2, 72))
        if not past:
            booked_at = min(booked_at, self.at(self.today, "00:00") - timedelta(minutes=rng.randint(30, 4000)))
        if s["cancelled_at"] is not None:
            self.bookings.append((s["id"], m.membership_id, "cancelled", booked_at, None))
            return
        if s["booked"] >= s["capacity"]:
            if not forced:
                self.bookings.append((s["id"], m.membership_id, "waitlisted", booked_at, None))
                return
            s = next((o for o in options if o["booked"] < o["capacity"] and o["cancelled_at"] is None), None)
            if s is None:
                return
        s["booked"] += 1
        if not past:
            self.bookings.append((s["id"], m.membership_id, "booked", booked_at, None))
            return
        roll = rng.random()
        if roll < 0.06 and not forced:
            s["booked"] -= 1
            self.bookings.append((s["id"], m.membership_id, "cancelled", booked_at, None))
        elif roll < 0.11 and not forced:
            self.bookings.append((s["id"], m.membership_id, "booked", booked_at, None))  # no-show
        else:
            checked_in = s["starts"] - timedelta(minutes=rng.randint(0, 12))
            self.bookings.append((s["id"], m.membership_id, "booked", booked_at, checked_in))
            m.visits.append(day)

    async def write_sessions_and_bookings(self) -> None:
        sessions = [s for day in sorted(self.by_day) for s in self.by_day[day]]
        await self.conn.execute(
            """INSERT INTO class_sessions (id, organization_id, class_type_id, coach_membership_id, starts_at, ends_at, capacity,
                                           published, cancelled_at, cancel_reason, created_by, created_at, updated_at)
               SELECT s.id, $1, s.type, s.coach, s.starts, s.ends, s.capacity, true, s.cancelled, s.reason, $9,
                      s.starts - interval '21 days', coalesce(s.cancelled, s.starts - interval '21 days')
               FROM unnest($2::uuid[], $3::uuid[], $4::uuid[], $5::timestamptz[], $6::timestamptz[], $7::int[],
                           $8::timestamptz[], $10::text[]) AS s(id, type, coach, starts, ends, capacity, cancelled, reason)""",
            self.org, [s["id"] for s in sessions], [s["type"] for s in sessions], [s["coach"] for s in sessions],
            [s["starts"] for s in sessions], [s["ends"] for s in sessions], [s["capacity"] for s in sessions],
            [s["cancelled_at"] for s in sessions], self.owner_user, [s["reason"] for s in sessions],
        )
        self.session_count = len(sessions)
        for chunk in _chunks(self.bookings, 20_000):
            await self.conn.execute(
                """INSERT INTO bookings (session_id, membership_id, status, booked_at, checked_in_at)
                   SELECT b.session_id, b.membership_id, b.status::booking_status, b.booked_at, b.checked_in_at
                   FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[], $5::timestamptz[])
                        AS b(session_id, membership_id, status, booked_at, checked_in_at)
                   ON CONFLICT (session_id, membership_id) DO NOTHING""",
                *map(list, zip(*chunk)),
            )

        # Last visits follow the attendance; a member seeded before the year keeps a later visit of theirs.
        await self.conn.execute(
            """UPDATE memberships m
               SET last_visit_at = CASE WHEN m.id = ANY($2::uuid[]) THEN b.last ELSE greatest(m.last_visit_at, b.last) END
               FROM (SELECT b.membership_id, max(b.checked_in_at) AS last FROM bookings b
                     JOIN class_sessions s ON s.id = b.session_id
                     WHERE s.organization_id = $1 AND b.checked_in_at IS NOT NULL GROUP BY b.membership_id) b
               WHERE m.id = b.membership_id AND m.organization_id = $1""",
            self.org, [m.membership_id for m in self.members if m.new],
        )

    # --- memberships, plans history, payments ------------------------------------------------------

    async def write_memberships_and_money(self) -> None:
        member_plans, payments = [], []
        for m in self.members:
            rng = _rng("money", m.key, self.today)
            if m.new and m is not self.dani:  # Dani's status is the example's
                m.payment = self._payment_status(rng, m)
            if m.plan is None or m.status == "pending":
                continue
            history = []
            if m.previous_plan:
                before, switched = m.previous_plan
                history.append((before, m.joined, switched - timedelta(days=1)))
                history.append((m.plan, switched, m.ended_on))
            else:
                history.append((m.plan, m.joined, m.ended_on))
            for plan_name, started, ended in history:
                member_plans.append((m.membership_id, self.plan_ids[plan_name], started, ended))
            payments += self._payments(rng, m, history)

        new = [m for m in self.members if m.new]
        users = await self._users([m.email for m in new], [m.full_name for m in new])
        await self.conn.execute(
            """INSERT INTO memberships (id, organization_id, user_id, role, status, plan, payment_status, phone, joined_at,
                                        ended_on, created_at)
               SELECT m.id, $1, m.user_id, 'member', m.status::membership_status, m.plan, m.payment::payment_status, m.phone,
                      m.joined, m.ended_on, m.joined::timestamptz
               FROM unnest($2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::date[], $9::date[])
                    AS m(id, user_id, status, plan, payment, phone, joined, ended_on)
               ON CONFLICT (organization_id, user_id) DO NOTHING""",
            self.org, [m.membership_id for m in new], [users[m.email] for m in new], [m.status for m in new],
            [m.plan for m in new], [m.payment for m in new],
            [f"+972-52-{1000000 + i * 2711:07d}" for i in range(len(new))], [m.joined for m in new], [m.ended_on for m in new],
        )
        ended = [m for m in self.members if not m.new and m.ended_on is not None]
        await self.conn.execute(
            """UPDATE memberships m SET ended_on = v.ended_on FROM unnest($1::uuid[], $2::date[]) AS v(id, ended_on)
               WHERE m.id = v.id AND m.organization_id = $3 AND m.ended_on IS NULL""",
            [m.membership_id for m in ended], [m.ended_on for m in ended], self.org,
        )
        await self.conn.execute(
            """INSERT INTO member_plans (membership_id, plan_id, started_on, ended_on)
               SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::date[], $4::date[])""",
            *map(list, zip(*member_plans)),
        )
        await self.conn.execute(
            """INSERT INTO payments (organization_id, membership_id, plan_id, amount_cents, status, due_on, paid_at, created_at)
               SELECT $1, p.membership_id, p.plan_id, p.amount, p.status::studio_payment_status, p.due_on, p.paid_at,
                      p.due_on::timestamptz
               FROM unnest($2::uuid[], $3::uuid[], $4::int[], $5::text[], $6::date[], $7::timestamptz[])
                    AS p(membership_id, plan_id, amount, status, due_on, paid_at)""",
            self.org, *map(list, zip(*payments)),
        )
        self.payment_rows = len(payments)

    def _payment_status(self, rng: random.Random, m: Member) -> str:
        plan = PLAN_BY_NAME.get(m.plan or "")
        if m.status in ("pending", "cancelled", "paused") or plan is None:
            return "none"
        if plan.interval == "year":
            return "paid"
        if plan.interval == "once":
            return "paid" if m.visits and m.visits[-1] >= self.today - timedelta(days=60) else "none"
        return rng.choices(["paid", "due", "overdue", "failed"], weights=[0.8, 0.07, 0.07, 0.06])[0]

    def _payments(self, rng: random.Random, m: Member, history: list[tuple[str, date, date | None]]) -> list[tuple]:
        out: list[tuple] = []
        billing_end = self.today
        if m.payment not in ("due", "overdue", "failed"):
            if m.status == "cancelled" and m.ended_on:
                billing_end = m.ended_on
            elif m.status == "paused" and m.last_active:
                billing_end = m.last_active
        anchor = m.joined.day if m.payment != "due" else (self.today - timedelta(days=rng.randint(0, 5))).day
        for plan_name, started, ended in history:
            plan = PLAN_BY_NAME[plan_name]
            pid = self.plan_ids[plan_name]
            stop = min(ended or billing_end, billing_end)
            if plan.interval == "once":
                visits = [v for v in m.visits if started <= v <= stop] or ([started] if started <= stop else [])
                per = 1 if plan_name == "Drop-in" else 10
                for v in visits[::per]:
                    out.append((m.membership_id, pid, plan.price_cents, "paid", v, self.at(v, "07:30")))
                continue
            step = 12 if plan.interval == "year" else 1
            due = date(started.year, started.month, min(anchor, 28))
            if due < started:
                due = _add_months(due, 1) if plan.interval == "month" else due
            due = max(due, started) if plan.interval == "year" else due
            while due <= stop:
                paid_at = self.done(self.at(due, "08:00", rng.randint(0, 600)))
                out.append((m.membership_id, pid, plan.price_cents, "paid", due, paid_at))
                due = _add_months(due, step)
        if out and m.plan and PLAN_BY_NAME[m.plan].interval != "once":
            last = out[-1]
            if m.payment == "failed":
                out[-1] = (*last[:3], "failed", last[4], None)
            elif m.payment == "due":
                out[-1] = (*last[:3], "pending", last[4], None)
            elif m.payment == "overdue":
                out[-1] = (*last[:3], "pending", last[4], None)
                if len(out) > 1 and (self.today - last[4]).days < 8:
                    prev = out[-2]
                    out[-2] = (*prev[:3], "pending", prev[4], None)
        elif m.payment == "due" and out:  # a pass bought but not paid yet
            last = out[-1]
            out[-1] = (*last[:3], "pending", max(last[4], self.today - timedelta(days=3)), None)
        # A few refunds in the history: a double charge put right.
        if len(out) > 6 and rng.random() < 0.03:
            i = rng.randrange(len(out) - 3)
            out[i] = (*out[i][:3], "refunded", out[i][4], out[i][5])
        return out

    # --- workouts ----------------------------------------------------------------------------------

    async def workouts(self) -> None:
        rng = _rng("workouts", self.today)
        existing = {r["title"] for r in await self.conn.fetch(
            "SELECT title FROM workouts WHERE organization_id = $1 AND deleted_at IS NULL", self.org)}
        self.workout_rows: list[tuple] = []  # (id, program, title, description, day, sections)
        murph_day = max(_last_monday_of_may(self.today), self.year_start + timedelta(days=1))
        bench = list(BENCHMARKS)
        day = self.year_start + timedelta(days=1)
        while day <= self.today + timedelta(days=7):
            if day == murph_day and "Murph" not in existing:
                self._workout("CrossFit", "Murph", "Partition the pull-ups, push-ups and squats as needed. Vest optional.",
                              day, [("Murph", MURPH[0], MURPH[1])])
            elif day.weekday() == 2 and (day - self.year_start).days % 21 < 7:
                name = bench[(day - self.year_start).days // 21 % len(bench)]
                fmt, moves = BENCHMARKS[name]
                self._workout("CrossFit", name, None, day, [("Warm-up", "2 rounds", _warmup(rng)), (name, fmt, moves)])
            else:
                lift, scheme, reps, load = rng.choice(STRENGTH)
                fmt = rng.choice(METCON_FORMATS)
                moves = rng.sample(METCON_MOVES, rng.randint(2, 4))
                self._workout("CrossFit", f"{lift} {scheme} + {fmt}", None, day,
                              [("Strength", scheme, [(lift, reps, None, None, load)]), ("Metcon", fmt, moves)])
            if day.weekday() in (0, 2, 4):
                title, sections = OLY[(day - self.year_start).days // 2 % len(OLY)]
                self._workout("Olympic Weightlifting", title, None, day, sections)
            if day.weekday() < 5:
                week = (day - self.year_start).days // 7 + 1
                focus = ["Engine", "Strength", "Gymnastics", "Intervals", "Long and steady"][day.weekday()]
                moves = rng.sample(METCON_MOVES, 3)
                self._workout("Coaching", f"Week {week} · {focus}", "Log your result and tell me how it felt.", day,
                              [("Warm-up", "2 rounds", _warmup(rng)), (focus, rng.choice(METCON_FORMATS), moves)])
            if day.weekday() in (6, 1, 3):
                self._workout("Home Workouts", f"Home {rng.choice(['AMRAP 20', 'EMOM 24', 'For time'])}", None, day,
                              [("Workout", rng.choice(["AMRAP 20", "EMOM 24", "For time"]), rng.sample(HOME, 4))])
            if day.weekday() == 6:
                self._workout("Mobility & Recovery", "Sunday mobility flow",
                              "25 minutes: couch stretch, pigeon pose, thoracic rotations, box breathing to finish.", day, [])
            day += timedelta(days=1)

        rows = self.workout_rows
        await self.conn.execute(
            """INSERT INTO workouts (id, organization_id, program_id, title, description, kind, scheduled_for, created_by,
                                     created_at, updated_at)
               SELECT w.id, $1, w.program, w.title, w.description, w.kind::workout_kind, w.day, $8,
                      least(w.day::timestamptz - interval '3 days', $9), least(w.day::timestamptz - interval '3 days', $9)
               FROM unnest($2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::date[])
                    AS w(id, program, title, description, kind, day)""",
            self.org, [r[0] for r in rows], [self.program_ids[r[1]] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
            ["structured" if r[5] else "freeform" for r in rows], [r[4] for r in rows], self.owner_user,
            self.done(self.at(self.today, "00:00")),
        )
        sections, movements = [], []
        for wid, _, _, _, _, secs in rows:
            for pos, (name, fmt, moves) in enumerate(secs, start=1):
                sid = uuid.uuid4()
                sections.append((sid, wid, pos, name, fmt))
                for mpos, (mname, reps, dist, dur, load) in enumerate(moves, start=1):
                    movements.append((sid, mpos, mname, reps, dist, None if load is None else float(load), dur,
                                      self.exercise_ids.get(mname.lower())))
        await self.conn.execute(
            """INSERT INTO workout_sections (id, workout_id, position, name, format)
               SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::int[], $4::text[], $5::text[])""",
            *map(list, zip(*sections)),
        )
        for chunk in _chunks(movements, 20_000):
            await self.conn.execute(
                """INSERT INTO workout_movements (section_id, position, name, reps, distance_m, load_kg, duration_s, exercise_id)
                   SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::int[], $5::int[], $6::numeric[], $7::int[],
                                        $8::uuid[])""",
                *map(list, zip(*chunk)),
            )
        # The studio's earlier workouts (typed before the library) get their exercise links too.
        names = list(self.exercise_ids)
        await self.conn.execute(
            """UPDATE workout_movements wm SET exercise_id = e.id
               FROM workout_sections s, workouts w, unnest($2::text[], $3::uuid[]) AS e(name, id)
               WHERE wm.section_id = s.id AND s.workout_id = w.id AND w.organization_id = $1
                 AND wm.exercise_id IS NULL AND lower(wm.name) = e.name""",
            self.org, names, [self.exercise_ids[n] for n in names],
        )

    def _workout(self, program: str, title: str, description: str | None, day: date, sections: list) -> None:
        self.workout_rows.append((uuid.uuid4(), program, title, description, day, sections))

    async def coaching_comments(self) -> None:
        rng = _rng("comments", self.today)
        coaching = self.program_ids["Coaching"]
        pool = [m for m in self.members if m.status == "active" and m.plan in ("Unlimited", "Annual", "3x/week")
                and m.joined < self.today - timedelta(days=30)]
        enrolled = rng.sample(pool, min(28, len(pool))) + [self.dani]
        home = rng.sample([m for m in self.members if m.status == "active"], 20)
        personal = [m for m in self.members if m.plan == "Personal training" and m.status == "active"]
        if self.dani not in personal:
            personal.append(self.dani)
        self.personal = personal
        enrollments = [(self.program_ids["Coaching"], m) for m in enrolled] + \
                      [(self.program_ids["Home Workouts"], m) for m in home] + \
                      [(self.program_ids["Personal Coaching"], m) for m in personal]
        await self.conn.execute(
            """INSERT INTO program_enrollments (program_id, membership_id, enrolled_at)
               SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[])
               ON CONFLICT (program_id, membership_id) DO NOTHING""",
            [p for p, _ in enrollments], [m.membership_id for _, m in enrollments],
            [self.done(self.at(max(m.joined, self.year_start), "10:00")) for _, m in enrollments],
        )
        comments: list[tuple] = []
        reads: list[tuple] = []
        latest = max(r[4] for r in self.workout_rows if r[1] == "Coaching" and r[4] < self.today)
        for wid, program, _, _, day, _ in self.workout_rows:
            if program != "Coaching" or day >= self.today:
                continue
            recent = (self.today - day).days <= 7
            authors = [m for m in enrolled if m.joined <= day and rng.random() < (0.12 if recent else 0.06)]
            if day == latest and len(authors) < 2:  # the coach always has something new to read
                authors = enrolled[:2]
            for m in authors:
                at = self.at(day, "18:00", rng.randint(0, 240))
                body = rng.choice(MEMBER_COMMENTS).format(
                    score=f"{rng.randint(5, 14)} rounds", scale=rng.choice(["the rower", "ring rows", "lighter KBs"])
                )
                cid = uuid.uuid4()
                comments.append((cid, wid, None, m.membership_id, body, at))
                unread = day == latest or ((self.today - day).days <= 3 and rng.random() < 0.8)
                if not unread:
                    reads.append((cid, self.head_coach, self.done(at + timedelta(hours=rng.randint(1, 20)))))
                    if rng.random() < 0.35:
                        reply = uuid.uuid4()
                        reply_at = self.done(at + timedelta(hours=rng.randint(1, 20), minutes=5))
                        comments.append((reply, wid, None, self.head_coach, rng.choice(COACH_REPLIES), reply_at))
                        reads.append((reply, self.head_coach, reply_at))
        self.comments, self.reads = comments, reads

    async def assignments(self) -> None:
        rng = _rng("assignments", self.today)
        rows, comments, reads = [], [], []
        last_monday = self.today - timedelta(days=self.today.weekday() or 7)
        for m in self.personal:
            days = (0, 3) if m is self.dani else tuple(sorted(rng.sample(range(6), 2)))
            coach = self.head_coach if m is self.dani else rng.choice(self.coach_ids)
            week0 = self.today - timedelta(days=self.today.weekday()) - timedelta(weeks=8)
            for week in range(8 + WEEKS_AHEAD + 1):
                for wd in days:
                    day = week0 + timedelta(weeks=week, days=wd)
                    if day < max(m.joined, self.year_start):
                        continue
                    name = day.strftime("%A")
                    title = f"{name}'s WOD" if wd == days[0] else f"{name} strength"
                    published = day < self.today + timedelta(days=3) or rng.random() < 0.3
                    aid = uuid.uuid4()
                    created = self.done(self.at(day - timedelta(days=5), "09:00"))
                    rows.append((aid, m.membership_id, coach, title, day, published,
                                 self.done(self.at(day - timedelta(days=2), "20:00")) if published else None, created))
                    if m is self.dani and day == last_monday:
                        at = self.at(day, "19:40")
                        comments.append((uuid.uuid4(), None, aid, m.membership_id,
                                         "Felt strong on the squats, but my left knee was sore on the lunges — "
                                         "should I swap them for step-ups next time?", at))
                    elif day < self.today and rng.random() < 0.3:
                        at = self.at(day, "19:00", rng.randint(0, 180))
                        cid = uuid.uuid4()
                        comments.append((cid, None, aid, m.membership_id, rng.choice(MEMBER_COMMENTS).format(
                            score="done", scale="lighter"), at))
                        if (self.today - day).days > 2:
                            reads.append((cid, coach, at + timedelta(hours=3)))
                            reply = uuid.uuid4()
                            comments.append((reply, None, aid, coach, rng.choice(COACH_REPLIES), at + timedelta(hours=3)))
                            reads.append((reply, coach, at + timedelta(hours=3)))
        await self.conn.execute(
            """INSERT INTO assignments (id, organization_id, membership_id, coach_membership_id, program_id, title, scheduled_for,
                                        published, published_at, created_by, created_at, updated_at, notes)
               SELECT a.id, $1, a.membership_id, a.coach, $2, a.title, a.day, a.published, a.published_at, $3,
                      a.created, coalesce(a.published_at, a.created), 'Warm up well; log your loads.'
               FROM unnest($4::uuid[], $5::uuid[], $6::uuid[], $7::text[], $8::date[], $9::bool[], $10::timestamptz[],
                           $11::timestamptz[]) AS a(id, membership_id, coach, title, day, published, published_at, created)""",
            self.org, self.program_ids["Personal Coaching"], self.owner_user, *map(list, zip(*rows)),
        )
        self.assignment_count = len(rows)
        all_comments = self.comments + comments
        await self.conn.execute(
            """INSERT INTO workout_comments (id, organization_id, workout_id, assignment_id, author_membership_id, body, created_at)
               SELECT c.id, $1, c.workout_id, c.assignment_id, c.author, c.body, c.at
               FROM unnest($2::uuid[], $3::uuid[], $4::uuid[], $5::uuid[], $6::text[], $7::timestamptz[])
                    AS c(id, workout_id, assignment_id, author, body, at)""",
            self.org, *map(list, zip(*all_comments)),
        )
        all_reads = self.reads + reads
        await self.conn.execute(
            """INSERT INTO workout_comment_reads (comment_id, coach_membership_id, read_at)
               SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) ON CONFLICT DO NOTHING""",
            *map(list, zip(*all_reads)),
        )

    # --- tasks, templates, forms -------------------------------------------------------------------

    async def tasks(self) -> None:
        roles = {r["role"]: r["id"] for r in await self.conn.fetch(
            """SELECT DISTINCT ON (role) role::text, id FROM memberships WHERE organization_id = $1 AND role <> 'member'
               ORDER BY role, created_at""", self.org)}
        roles["coach"] = self.head_coach
        for title, role, status, due_in, description in YEAR_TASKS:
            due = self.today + timedelta(days=due_in)
            await self.conn.execute(
                """INSERT INTO tasks (organization_id, title, description, due_date, assignee_membership_id, status, completed_at,
                                      created_by, created_at, updated_at)
                   SELECT $1, $2::text, $3::text, $4::date, $5::uuid, $6::task_status, $7::timestamptz, $8::uuid, $9::timestamptz,
                          coalesce($7, $9)
                   WHERE NOT EXISTS (SELECT 1 FROM tasks WHERE organization_id = $1 AND title = $2 AND deleted_at IS NULL)""",
                self.org, title, description, due, roles.get(role), status,
                self.at(due, "16:00") if status == "done" else None, self.owner_user,
                self.at(min(due, self.today) - timedelta(days=10), "09:00"),
            )

    async def templates(self) -> None:
        rng = _rng("templates", self.today)
        for name, kind, description, weeks, per_week in TEMPLATES:
            tid = await self.conn.fetchval(
                """INSERT INTO program_templates (organization_id, name, description, program_kind, created_by)
                   SELECT $1, $2::text, $3::text, $4::program_kind, $5::uuid
                   WHERE NOT EXISTS (SELECT 1 FROM program_templates WHERE organization_id = $1 AND lower(name) = lower($2)
                                     AND deleted_at IS NULL)
                   RETURNING id""",
                self.org, name, description, kind, self.owner_user,
            )
            if tid is None:
                continue
            rows = []
            for week in range(weeks):
                for i in range(per_week):
                    offset = week * 7 + [0, 2, 4, 5][i]
                    lift, scheme, reps, load = STRENGTH[(week * per_week + i) % len(STRENGTH)]
                    moves = rng.sample(HOME if kind == "feed" else METCON_MOVES, 3)
                    sections = [_section_json("Strength", scheme, [(lift, reps, None, None, load)]),
                                _section_json("Conditioning", rng.choice(METCON_FORMATS), moves)]
                    rows.append((tid, offset, f"Week {week + 1} day {i + 1}: {lift}", None, json.dumps(sections)))
            await self.conn.execute(
                """INSERT INTO program_template_workouts (template_id, day_offset, title, description, sections)
                   SELECT t.tid, t.offset_, t.title, t.description, t.sections::jsonb
                   FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::text[])
                        AS t(tid, offset_, title, description, sections)""",
                *map(list, zip(*rows)),
            )

    async def forms(self) -> None:
        rng = _rng("forms", self.today)
        ids = {}
        for key, title, required, valid in FORMS:
            ids[key] = await self.conn.fetchval(
                """WITH found AS (SELECT id FROM forms WHERE organization_id = $1 AND type_key = $2::text AND deleted_at IS NULL),
                        made AS (INSERT INTO forms (organization_id, type_key, title, required, valid_days, created_at)
                                 SELECT $1, $2::text, $3::text, $4::bool, $5::int, $6::timestamptz
                                 WHERE NOT EXISTS (SELECT 1 FROM found) RETURNING id)
                   SELECT id FROM found UNION ALL SELECT id FROM made LIMIT 1""",
                self.org, key, title, required, valid, self.at(self.today - timedelta(days=1100), "09:00"),
            )
        rows = []
        campaign_old, campaign_new = self.today - timedelta(days=200), self.today - timedelta(days=40)

        def add(form: str, m: Member, assigned: date, done_after: int | None, valid: int | None) -> None:
            completed = assigned + timedelta(days=done_after) if done_after is not None else None
            if completed is not None and completed >= self.today:
                completed = None
            status = "pending" if completed is None else "completed"
            if completed is not None and valid is not None and completed + timedelta(days=valid) < self.today:
                status = "expired"
            rows.append((ids[form], m.membership_id, status, self.at(assigned, "10:00"), assigned + timedelta(days=7),
                         self.at(completed, "20:00", rng.randint(0, 120)) if completed else None))

        for m in self.members:
            if m.status == "cancelled" and m.ended_on and m.ended_on < self.year_start:
                continue
            never = m.status == "pending" or rng.random() < 0.03
            add("waiver", m, m.joined, None if never else rng.randint(0, 2), None)
            add("par_q", m, m.joined, None if never else rng.randint(0, 3), 365)
            renewal = m.joined + timedelta(days=365)
            while renewal < self.today and m.status in ("active", "paused"):
                add("par_q", m, renewal, None if rng.random() < 0.15 else rng.randint(0, 20), 365)
                renewal += timedelta(days=365)
            if m.status == "active":
                if m.joined < campaign_old:
                    add("health_update", m, campaign_old, rng.randint(0, 14), 90)
                if m.joined < campaign_new:
                    add("health_update", m, campaign_new, None if rng.random() < 0.3 else rng.randint(0, 20), 90)
        await self.conn.execute(
            """INSERT INTO form_assignments (organization_id, form_id, membership_id, status, assigned_at, due_on, completed_at)
               SELECT $1, f.form_id, f.membership_id, f.status::form_assignment_status, f.assigned_at, f.due_on, f.completed_at
               FROM unnest($2::uuid[], $3::uuid[], $4::text[], $5::timestamptz[], $6::date[], $7::timestamptz[])
                    AS f(form_id, membership_id, status, assigned_at, due_on, completed_at)""",
            self.org, *map(list, zip(*rows)),
        )


# ---------------------------------------------------------------------------------------------------


async def year_summary(conn: asyncpg.Connection, org_id: uuid.UUID | str) -> YearSummary:
    """Aggregates of an organization's year: what the seed tests compare between runs."""
    row = await conn.fetchrow(
        """SELECT
             (SELECT count(*) FROM memberships WHERE organization_id = $1 AND role = 'member') AS members,
             (SELECT count(*) FROM memberships WHERE organization_id = $1 AND role = 'member' AND status = 'active') AS active_members,
             (SELECT count(*) FROM memberships WHERE organization_id = $1 AND role = 'member' AND status = 'cancelled') AS cancelled_members,
             (SELECT count(*) FROM memberships WHERE organization_id = $1 AND role = 'member' AND status = 'paused') AS paused_members,
             (SELECT count(*) FROM plans WHERE organization_id = $1) AS plans,
             (SELECT count(*) FROM member_plans mp JOIN memberships m ON m.id = mp.membership_id WHERE m.organization_id = $1) AS member_plans,
             (SELECT count(*) FROM payments WHERE organization_id = $1) AS payments,
             (SELECT coalesce(sum(amount_cents), 0) FROM payments WHERE organization_id = $1 AND status = 'paid') AS payments_paid_cents,
             (SELECT count(*) FROM class_types WHERE organization_id = $1 AND deleted_at IS NULL) AS class_types,
             (SELECT count(*) FROM class_sessions WHERE organization_id = $1 AND deleted_at IS NULL) AS class_sessions,
             (SELECT count(*) FROM class_sessions WHERE organization_id = $1 AND cancelled_at IS NOT NULL) AS cancelled_sessions,
             (SELECT count(*) FROM bookings b JOIN class_sessions s ON s.id = b.session_id WHERE s.organization_id = $1) AS bookings,
             (SELECT count(*) FROM bookings b JOIN class_sessions s ON s.id = b.session_id
               WHERE s.organization_id = $1 AND b.checked_in_at IS NOT NULL) AS attended,
             (SELECT count(*) FROM workouts WHERE organization_id = $1 AND deleted_at IS NULL) AS workouts,
             (SELECT count(*) FROM workout_movements wm JOIN workout_sections s ON s.id = wm.section_id
               JOIN workouts w ON w.id = s.workout_id WHERE w.organization_id = $1) AS workout_movements,
             (SELECT count(*) FROM workout_movements wm JOIN workout_sections s ON s.id = wm.section_id
               JOIN workouts w ON w.id = s.workout_id WHERE w.organization_id = $1 AND wm.exercise_id IS NOT NULL) AS linked_movements,
             (SELECT count(*) FROM workout_comments WHERE organization_id = $1) AS comments,
             (SELECT count(*) FROM workout_comment_reads r JOIN workout_comments c ON c.id = r.comment_id
               WHERE c.organization_id = $1) AS comment_reads,
             (SELECT count(*) FROM assignments WHERE organization_id = $1 AND deleted_at IS NULL) AS assignments,
             (SELECT count(*) FROM assignments WHERE organization_id = $1 AND published AND deleted_at IS NULL) AS published_assignments,
             (SELECT count(*) FROM tasks WHERE organization_id = $1 AND deleted_at IS NULL) AS tasks,
             (SELECT count(*) FROM program_templates WHERE organization_id = $1 AND deleted_at IS NULL) AS templates,
             (SELECT count(*) FROM program_template_workouts tw JOIN program_templates t ON t.id = tw.template_id
               WHERE t.organization_id = $1) AS template_workouts,
             (SELECT count(*) FROM form_assignments WHERE organization_id = $1) AS form_assignments,
             (SELECT count(*) FROM exercises WHERE organization_id IS NULL AND deleted_at IS NULL) AS global_exercises,
             (SELECT count(*) FROM exercises WHERE organization_id = $1 AND deleted_at IS NULL) AS studio_exercises""",
        uuid.UUID(str(org_id)),
    )
    return YearSummary(**dict(row))


def _columns(exercises: list[Exercise]) -> list[list[str]]:
    return [[e.name for e in exercises], [e.modality for e in exercises], [",".join(e.equipment) for e in exercises],
            [",".join(e.muscles) for e in exercises], [",".join(e.aliases) for e in exercises]]


def _chunks(rows: list, size: int) -> list[list]:
    return [rows[i:i + size] for i in range(0, len(rows), size)] if rows else []


def _add_months(d: date, months: int) -> date:
    y, m = divmod(d.month - 1 + months, 12)
    return date(d.year + y, m + 1, min(d.day, 28))


def _last_monday_of_may(today: date) -> date:
    """Memorial Day, when Murph is done: the latest one on or before today."""
    for year in (today.year, today.year - 1):
        d = date(year, 5, 31)
        d -= timedelta(days=d.weekday())
        if d <= today:
            return d
    raise AssertionError("unreachable")


def _warmup(rng: random.Random) -> list[tuple]:
    return [(rng.choice(["Row", "Bike", "Run"]), None, None, 180, None), ("PVC Pass-through", 10, None, None, None),
            ("Air Squat", 10, None, None, None)]


def _section_json(name: str, fmt: str, moves: list[tuple]) -> dict:
    movements = []
    for mname, reps, dist, dur, load in moves:
        mv = {"name": mname, "reps": reps, "distanceM": dist, "durationS": dur, "loadKg": load}
        movements.append({k: v for k, v in mv.items() if v is not None})
    return {"name": name, "format": fmt, "movements": movements}
