// The configuration reference, docs/configuration.md, generated whole from the schema (lib/config/schema.ts): each
// key's meaning from its JSDoc, its default from zod's own `.default(...)`, so neither the tables nor a JSDoc `@default`
// can drift from the code; and the access modes' actions from lib/config/access.ts. `npm run docs:generate` writes it
// (scripts/docsGenerate.ts); test/scripts/configReference.test.ts keeps the file equal to what this generates.
//
// Hand-written rather than through z.toJSONSchema: JSON Schema has no place for the JSDoc the construct's users read in
// their editor (the one source of each key's meaning), and no way to say "derived" or "the job name" for a default that
// code works out.
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import ts from 'typescript';
import type { z } from 'zod';
import { BUCKET_MODES, TABLE_MODES } from '../lib/config/access';
import { environmentSchema, jobSchema } from '../lib/config/schema';
import { ROOT } from './markdown';

export const SCHEMA_FILE = path.join(ROOT, 'lib', 'config', 'schema.ts');
/** The generated reference, relative to the project. */
export const CONFIG_DOC = 'docs/configuration.md';
export const CONFIG_DOC_FILE = path.join(ROOT, CONFIG_DOC);

/** One key's documentation as its JSDoc states it. */
interface KeyDoc {
  text: string;
  /** The `@default` tag's text, when it has one. */
  default?: string;
  /** The schema variable the key's value is built from (`pacingSchema.prefault({})`: pacingSchema), if any. */
  schemaName?: string;
  /** For a record, the schema variable of its values (`z.record(z.string(), appTableSchema)`: appTableSchema). */
  valueSchemaName?: string;
}

/** The schema's JSDoc: each object schema's keys by variable name, and each schema variable's own JSDoc. */
interface SchemaDocs {
  keys: Map<string, Map<string, KeyDoc>>;
  variables: Map<string, string>;
}

/** One row of the table. */
export interface ReferenceRow {
  key: string;
  /** `required`, a default value in backticks, or the JSDoc's words for a default code works out. */
  default: string;
  meaning: string;
}

/** The root identifier of a call chain (`perKeySchema.optional()` and `admissionSchema.prefault({})` name their schema). */
function rootIdentifier(node: ts.Expression): string | undefined {
  let current: ts.Expression = node;
  for (;;) {
    if (ts.isCallExpression(current)) current = current.expression;
    else if (ts.isPropertyAccessExpression(current)) current = current.expression;
    else break;
  }
  return ts.isIdentifier(current) ? current.text : undefined;
}

/** A node's JSDoc: its text on one line and its `@default` tag's text, if any. */
function jsDocOf(node: ts.Node): { text: string; default?: string } {
  const jsDoc = (node as unknown as { jsDoc?: ts.JSDoc[] }).jsDoc?.at(-1);
  const text = (ts.getTextOfJSDocComment(jsDoc?.comment) ?? '').replace(/\s+/g, ' ').trim();
  const tag = jsDoc?.tags?.find((t) => t.tagName.text === 'default');
  const defaultText = tag ? ts.getTextOfJSDocComment(tag.comment)?.trim() : undefined;
  return { text, ...(defaultText !== undefined ? { default: defaultText.replace(/\s+/g, ' ') } : {}) };
}

/** The last identifier among a call chain's arguments (`z.record(z.string(), appTableSchema).default({})`). */
function argumentIdentifier(node: ts.Expression): string | undefined {
  let current: ts.Expression = node;
  let found: string | undefined;
  while (ts.isCallExpression(current) || ts.isPropertyAccessExpression(current)) {
    if (ts.isCallExpression(current)) found ??= current.arguments.filter(ts.isIdentifier).at(-1)?.text;
    current = current.expression;
  }
  return found;
}

/** Every object-literal schema in the file (`const x = z.object({...})`, `strictBlock({...})`), by variable name. */
function docsOf(source: string): SchemaDocs {
  const file = ts.createSourceFile(SCHEMA_FILE, source, ts.ScriptTarget.Latest, true);
  const docs: SchemaDocs = { keys: new Map(), variables: new Map() };
  const firstObjectArgument = (node: ts.Node): ts.ObjectLiteralExpression | undefined => {
    if (ts.isCallExpression(node)) {
      const literal = node.arguments.find(ts.isObjectLiteralExpression);
      if (literal && /^(z\.object|z\.strictObject|strictBlock)$/.test(node.expression.getText(file).replace(/\s+/g, ''))) return literal;
      return firstObjectArgument(node.expression);
    }
    if (ts.isPropertyAccessExpression(node)) return firstObjectArgument(node.expression);
    return undefined;
  };
  for (const statement of file.statements) {
    if (!ts.isVariableStatement(statement)) continue;
    for (const declaration of statement.declarationList.declarations) {
      if (!ts.isIdentifier(declaration.name)) continue;
      const own = jsDocOf(statement).text;
      if (own) docs.variables.set(declaration.name.text, own);
      const literal = declaration.initializer && firstObjectArgument(declaration.initializer);
      if (!literal) continue;
      const keys = new Map<string, KeyDoc>();
      for (const property of literal.properties) {
        if (!ts.isPropertyAssignment(property) || !ts.isIdentifier(property.name)) continue;
        const schemaName = rootIdentifier(property.initializer);
        const valueSchemaName = argumentIdentifier(property.initializer);
        keys.set(property.name.text, {
          ...jsDocOf(property),
          ...(schemaName ? { schemaName } : {}),
          ...(valueSchemaName ? { valueSchemaName } : {}),
        });
      }
      docs.keys.set(declaration.name.text, keys);
    }
  }
  return docs;
}

type AnySchema = z.core.$ZodType;
const defOf = (schema: AnySchema) => schema._zod.def as unknown as { type: string; innerType?: AnySchema; defaultValue?: unknown; shape?: Record<string, AnySchema> };

/** The schema under its optional/default/prefault wrappers, whether any makes the key optional, and its default. */
function unwrap(schema: AnySchema): { inner: AnySchema; optional: boolean; hasDefault: boolean; defaultValue?: unknown; prefault: boolean } {
  let inner = schema;
  let optional = false;
  let hasDefault = false;
  let prefault = false;
  let defaultValue: unknown;
  for (;;) {
    const def = defOf(inner);
    if (def.type === 'optional') optional = true;
    else if (def.type === 'default') [hasDefault, defaultValue] = [true, def.defaultValue];
    else if (def.type === 'prefault') prefault = true;
    else break;
    inner = def.innerType as AnySchema;
  }
  return { inner, optional, hasDefault, defaultValue, prefault };
}

/** A default as the table shows it: the value in backticks. */
const shown = (value: unknown): string => `\`${JSON.stringify(value)}\``.replace(/"/g, "'");
/** A JSDoc default that code works out, as words; one that starts with a number shows the number as a value. */
const worded = (text: string): string => text.replace(/^(-?\d+(\.\d+)?)/, '`$1`');
const isEmpty = (value: unknown): boolean => typeof value === 'object' && value !== null && Object.keys(value).length === 0;

/** How a table names a record's entry (`uses.tables.<alias>`), or undefined to show the record as one key. */
type EntryName = (name: string, prefix: string) => string | undefined;

/** A key's meaning: its JSDoc, else its schema's (a block's; a record's values', listing their keys). */
function meaningOf(doc: KeyDoc | undefined, docs: SchemaDocs, inner: AnySchema): string {
  if (doc?.text) return doc.text;
  const own = doc?.schemaName ? docs.variables.get(doc.schemaName) : undefined;
  if (own) return own;
  const valueType = (defOf(inner) as { valueType?: AnySchema }).valueType;
  const valueDoc = valueType && doc?.valueSchemaName ? docs.variables.get(doc.valueSchemaName) : undefined;
  if (!valueType || !valueDoc) return '';
  const valueKeys = Object.keys(defOf(unwrap(valueType).inner).shape ?? {});
  return valueKeys.length > 0 ? `${valueDoc} Its keys: ${valueKeys.map((k) => `\`${k}\``).join(', ')}.` : valueDoc;
}

/**
 * The rows for every key of `schema` (documented as `docs`), nested objects built from a named schema expanded under
 * their key. A problem list collects each `@default` that disagrees with zod's default, and each key without JSDoc.
 */
function rowsOf(schema: AnySchema, docs: Map<string, KeyDoc>, all: SchemaDocs, prefix: string, problems: string[], entryOf: EntryName): ReferenceRow[] {
  const shape = defOf(schema).shape ?? {};
  const rows: ReferenceRow[] = [];
  for (const [key, child] of Object.entries(shape)) {
    const doc = docs.get(key);
    const name = `${prefix}${key}`;
    const { inner, optional, hasDefault, defaultValue, prefault } = unwrap(child);
    const meaning = meaningOf(doc, all, inner);
    if (!meaning) problems.push(`${name} has no JSDoc in lib/config/schema.ts`);
    const nested = doc?.schemaName ? all.keys.get(doc.schemaName) : undefined;
    // `@default 262144 (256 KiB, the SQS maximum)`: the value, then words about it.
    const statedValue = doc?.default?.split(' ')[0];
    if (hasDefault && statedValue !== undefined && statedValue !== JSON.stringify(defaultValue) && !(statedValue === 'none' && isEmpty(defaultValue))) {
      problems.push(`${name}: its JSDoc says @default ${doc?.default}, its schema defaults to ${JSON.stringify(defaultValue)}`);
    }
    const isBlock = nested !== undefined && defOf(inner).type === 'object';
    const defaultCell = isBlock
      ? (optional ? 'none' : hasDefault || prefault ? '' : 'required')
      : hasDefault ? (isEmpty(defaultValue) && doc?.default ? doc.default : shown(defaultValue)) : optional ? worded(doc?.default ?? 'none') : 'required';
    if (isBlock) {
      // A block: its own row says what it is, its keys follow.
      rows.push({ key: name, default: defaultCell, meaning });
      rows.push(...rowsOf(inner, nested, all, `${name}.`, problems, entryOf));
      continue;
    }
    // A record of a block (uses.tables) is keyed by the job's own names: the row shows one entry.
    const entry = defOf(inner).type === 'record' ? (entryOf(name, prefix) ?? name) : name;
    rows.push({ key: entry, default: defaultCell, meaning });
  }
  return rows;
}

/** The per-job table's rows, and the problems that would make it wrong. */
export function jobReference(source = readFileSync(SCHEMA_FILE, 'utf8')): { rows: ReferenceRow[]; problems: string[] } {
  const all = docsOf(source);
  const problems: string[] = [];
  const entryOf: EntryName = (name, prefix) => (prefix !== '' ? `${name}.<alias>` : undefined);
  const rows = rowsOf(jobSchema as unknown as AnySchema, all.keys.get('jobSchema') ?? new Map(), all, '', problems, entryOf);
  return { rows, problems };
}

/** The environment table's rows (a job's own keys are the per-job table's), and the problems that would make it wrong. */
export function environmentReference(source = readFileSync(SCHEMA_FILE, 'utf8')): { rows: ReferenceRow[]; problems: string[] } {
  const all = docsOf(source);
  const problems: string[] = [];
  const entryOf: EntryName = (name) => `${name}.${name === 'jobs' ? '<name>' : '<key>'}`;
  const rows = rowsOf(environmentSchema as unknown as AnySchema, all.keys.get('environmentSchema') ?? new Map(), all, '', problems, entryOf);
  return { rows, problems };
}

/** A key table: key, default, meaning. */
export function renderJobReference(rows: readonly ReferenceRow[]): string {
  const cell = (text: string) => text.replace(/\|/g, '\\|');
  return [
    '| key | default | meaning |',
    '| --- | --- | --- |',
    ...rows.map((r) => `| \`${r.key}\` | ${cell(r.default)} | ${cell(r.meaning)} |`),
  ].join('\n');
}

/** The access modes of `uses`, each with its table and bucket actions (lib/config/access.ts), as a table. */
export function renderModes(): string {
  const tableModes: Record<string, readonly string[]> = TABLE_MODES;
  const bucketModes: Record<string, readonly string[]> = BUCKET_MODES;
  const modes = [...new Set([...Object.keys(tableModes), ...Object.keys(bucketModes)])];
  const actions = (list: readonly string[] | undefined) => (list ?? []).map((a) => `\`${a}\``).join(', ');
  return [
    '| mode | table actions | bucket actions |',
    '| --- | --- | --- |',
    ...modes.map((m) => `| \`${m}\` | ${actions(tableModes[m])} | ${actions(bucketModes[m])} |`),
  ].join('\n');
}

/** docs/configuration.md as the schema makes it, and the problems that would make it wrong. */
export function configurationReference(source = readFileSync(SCHEMA_FILE, 'utf8')): { text: string; problems: string[] } {
  const environment = environmentReference(source);
  const job = jobReference(source);
  const text = [
    '# Configuration reference',
    '',
    '<!-- Generated by `npm run docs:generate` from lib/config/schema.ts and lib/config/access.ts: edit those, not this file. -->',
    '',
    'Configuration lives in [`lib/config/environments.ts`](../lib/config/environments.ts) (the values per environment)',
    'and [`lib/config/schema.ts`](../lib/config/schema.ts) (the rules and every default, written once there). Each key',
    "below is that file's own documentation: its meaning from the key's JSDoc, its default from the schema, so this page",
    'and the code cannot disagree (a test regenerates it). Synthesis validates the chosen environment first and reports',
    'every bad key at once:',
    '',
    '```text',
    'Invalid configuration for environment "prod":',
    '  - jobs.payment-reconciliation.pacing.batchSize: Too big: expected number to be <=10000',
    '  - jobs.payment-reconciliation.idempotencyRecordDays: must be at least queueRetentionDays + 14 (DLQ retention) = 18, so a redrive never repeats an effect',
    '```',
    '',
    "A team's own CDK app gives `new PacedJobs(stack, id, props)` the per-job keys under `jobs`, and of the environment's",
    'keys `alarmEmail`, `logRetentionDays`, `retainData` and `operatorRoles`; there a job\'s `uses` names the table, bucket',
    "or secret construct itself, and `entry` the job's code (`PacedJobsProps` in",
    '[`lib/paced-jobs.ts`](../lib/paced-jobs.ts)).',
    '',
    '## Environment',
    '',
    renderJobReference(environment.rows),
    '',
    '## Per job (`jobs.<name>`)',
    '',
    'A key under `pacing` marked *derived* is worked out from the rate unless set (`deriveBatching` in',
    '`lambda/core/pacingSettings.ts`); `npm run ops -- limits list --job <job>` shows what a deployed job got.',
    '',
    renderJobReference(job.rows),
    '',
    '## Access modes (`uses`)',
    '',
    'The stack grants each function exactly what `uses` lists and hands the names to the job\'s code in `JOB_SETTINGS`:',
    '`discover` is what the producer\'s discovery (and `countEligible`) may do, `apply` what the consumer\'s apply may do,',
    'each one mode or a list of modes; `access` is shorthand for both (the consumer gets all of it, the producer its',
    'reading modes). Pick the narrowest modes that work. Query and Scan are granted on the table and on each configured',
    'index; ListBucket on the bucket, every other bucket action on its objects.',
    '',
    renderModes(),
    '',
  ].join('\n');
  return { text, problems: [...environment.problems, ...job.problems] };
}
