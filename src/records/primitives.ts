/** The field schemas records are made of (ids, versions, times, signal keys). */
import { z } from "zod";
import { TextSchema } from "./json.ts";

export const Text = TextSchema;
export const Id = Text.min(1).max(256);
export const Version = z.number().int().nonnegative();
/** A signal key: what outside input a wait names (`approval:task_7`, `payment:order-12`). */
export const SignalKey = Text.min(1).max(256);
export const Time = z.number().finite();
