// The coach's wire shapes (seed 003 §6, §8 as the gateway serves them) and the page's own state.

export type ExerciseType = "reps" | "hold" | "duration" | "intervals";
export type GroupType = "circuit" | "superset" | "giant_set" | "warmup" | "cooldown" | "sequence";

export type ExerciseGroup = {
  id: string;
  type: GroupType;
  position: number;
  name?: string | null;
  rounds?: number | null;
  rest_between_rounds_sec?: number | null;
};

export type Exercise = {
  id: string;
  order: number;
  exercise_name: string;
  exercise_type: ExerciseType;
  sets?: number | null;
  reps?: number[] | null;
  load_each?: number[] | null;
  load_unit?: "kg" | "lb" | "bodyweight" | null;
  hold_sec?: number[] | null;
  rest_sec?: number | null;
  duration_min?: number | null;
  distance?: number | null;
  distance_unit?: string | null;
  target_pace?: string | null;
  rounds?: number | null;
  work_sec?: number | null;
  muscles_utilized?: { muscle: string; share: number }[];
  goals_addressed?: { goal: string; share: number }[];
  reasoning?: string;
  group?: ExerciseGroup | null;
};

export type WorkoutPayload = {
  title: string;
  description?: string | null;
  estimated_duration_min?: number | null;
  exercises: Exercise[];
};

export type Artifact = {
  artifact_id: string;
  type: string;
  schema_version?: string;
  title: string;
  summary?: { exercise_count?: number; estimated_duration_min?: number | null; muscles?: string[] };
  auto_start?: boolean;
  payload: WorkoutPayload;
};

/** One `data:` frame of `POST …/coach/stream`. Tool frames are typed by the tool's name, so they
 * are read loosely and narrowed in the reducer. */
export type Frame =
  | { type: "status"; data: { message: string; tool?: string; phase?: "start" | "done" | "error" } }
  | { type: "knowledge"; data: { source: string; displayName: string; status?: string } }
  | { type: "done"; sessionId?: string }
  | { type: "error"; message: string; code?: string; traceId?: string | null }
  | ToolFrame;

export type ToolFrame = {
  type: string;
  data?: Record<string, unknown>;
  formatted?: string;
  status?: "done" | "failed";
  artifact?: Artifact;
  artifact_id?: string;
};

export type TranscriptEntry = {
  role: "user" | "coach";
  text: string;
  artifact?: Artifact | null;
  question?: { question: string; options?: string[] } | null;
  createdAt?: string;
};

export type CoachSession = { id: string; status?: string; title?: string | null; createdAt?: string; updatedAt?: string };

export type SessionDetail = {
  session: CoachSession;
  recentActions?: unknown[];
  transcript: TranscriptEntry[];
  workout: Artifact | null;
};

export type Item =
  | { kind: "user"; key: string; text: string }
  /** A coach bubble; `artifactId` puts a workout card under it. */
  | { kind: "coach"; key: string; text: string; artifactId: string | null }
  | { kind: "question"; key: string; text: string; options: string[]; answered: boolean }
  | { kind: "knowledge"; key: string; sources: { source: string; displayName: string }[] }
  | { kind: "error"; key: string; code: string | null; message: string; traceId: string | null };

export type CoachState = {
  sessionId: string | null;
  items: Item[];
  /** Every workout seen, by artifact id, in its latest version. */
  workouts: Record<string, Artifact>;
  /** The workout the member is looking at: what Swap, Adjust and Log act on. */
  currentId: string | null;
  logged: string[];
  running: boolean;
  /** The latest progress line of the running answer. */
  status: string | null;
  loading: boolean;
  seq: number;
};
