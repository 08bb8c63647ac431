// Monitoring, checked locally: one synthesized CloudWatch metric alarm (AWS::CloudWatch::Alarm) read from the template
// and evaluated period by period over samples of a local run (local/metricSamples.ts), as CloudWatch would evaluate it,
// so a test can show what the alarm does with what the pipeline really emits (the stalled alarm on a paused consumer
// and on a draining backlog).
//
// Hand-written: no library evaluates CloudWatch metric math or CloudWatch's alarm rules (the AWS SDK only sends them to
// CloudWatch, and the local servers have no CloudWatch). So this covers the subset our alarms use, and refuses the rest
// by name: numbers, query ids, + - * /, unary minus, comparisons (== != < > <= >=), AND/OR (&& ||), IF(cond, a[, b])
// and FILL(m, value), with the semantics of the CloudWatch user guide ("Metric math syntax and functions"): an
// operation between two time series treats a value missing in one of them as 0, a time series against a scalar keeps
// its gaps, division by zero drops the datapoint, IF follows the guide's table for a missing branch. The alarm's state
// per period follows "How alarm state is evaluated when data is missing" (both of its tables are unit tests):
// the last EvaluationPeriods existing datapoints of the evaluation range when there are that many, else the missing ones
// treated as TreatMissingData says. CloudWatch does not publish how long its evaluation range is (its examples take 5
// datapoints for 3 evaluation periods), so it is EvaluationPeriods + 2 unless told.
import { resolveValue, type CloudFormationTemplate, type ResolveContext } from './template';
import type { StackPlan } from './plan';
import type { MetricSample } from './metricsTap';

export class AlarmEvaluationError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AlarmEvaluationError';
  }
}

/** A metric math function, operator or name outside the subset this evaluator supports. */
export class UnsupportedMetricMathError extends AlarmEvaluationError {
  constructor(
    /** The function, operator or name, e.g. `METRICS`, `^`. */
    public readonly unsupported: string,
    public readonly expression: string,
    message: string,
  ) {
    super(message);
    this.name = 'UnsupportedMetricMathError';
  }
}

export const AlarmState = { OK: 'OK', ALARM: 'ALARM', INSUFFICIENT_DATA: 'INSUFFICIENT_DATA' } as const;
export type AlarmState = (typeof AlarmState)[keyof typeof AlarmState];

export const TreatMissingData = {
  missing: 'missing',
  ignore: 'ignore',
  breaching: 'breaching',
  notBreaching: 'notBreaching',
} as const;
export type TreatMissingData = (typeof TreatMissingData)[keyof typeof TreatMissingData];

const COMPARISONS = {
  GreaterThanThreshold: (v: number, t: number) => v > t,
  GreaterThanOrEqualToThreshold: (v: number, t: number) => v >= t,
  LessThanThreshold: (v: number, t: number) => v < t,
  LessThanOrEqualToThreshold: (v: number, t: number) => v <= t,
} as const;
export type ComparisonOperator = keyof typeof COMPARISONS;

const STATISTICS = {
  Sum: (v: number[]) => v.reduce((a, b) => a + b, 0),
  Maximum: (v: number[]) => Math.max(...v),
  Minimum: (v: number[]) => Math.min(...v),
  Average: (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length,
  SampleCount: (v: number[]) => v.length,
} as const;
export type Statistic = keyof typeof STATISTICS;

/** One MetricStat query of the alarm: a metric, its statistic and period. */
export interface MetricStatQuery {
  id: string;
  namespace: string;
  metricName: string;
  dimensions: Record<string, string>;
  stat: Statistic;
  periodSeconds: number;
}

export interface ExpressionQuery {
  id: string;
  expression: string;
}

/** A metric alarm as CloudWatch evaluates it; readAlarm builds one from the template. */
export interface AlarmDefinition {
  logicalId: string;
  alarmName: string;
  threshold: number;
  comparisonOperator: ComparisonOperator;
  evaluationPeriods: number;
  /** @default evaluationPeriods */
  datapointsToAlarm: number;
  /** @default missing */
  treatMissingData: TreatMissingData;
  /** Every query's period (CloudWatch requires one period for all the metrics of an alarm). */
  periodSeconds: number;
  /** The query whose values the alarm compares (the one with ReturnData; a plain metric alarm's one metric). */
  returnId: string;
  metrics: MetricStatQuery[];
  expressions: ExpressionQuery[];
}

/** The evaluation of one period: the queries' values, the alarm's datapoint and the state at the period's end. */
export interface PeriodEvaluation {
  startMs: number;
  endMs: number;
  /** Every query's value in the period (undefined: no datapoint). */
  values: Record<string, number | undefined>;
  /** The returned query's datapoint; undefined when it has none (missing data). */
  value: number | undefined;
  /** Whether the datapoint breaches the threshold; undefined when it is missing. */
  breaching: boolean | undefined;
  state: AlarmState;
}

export interface EvaluateOptions {
  /** The datapoints CloudWatch retrieves per evaluation. @default evaluationPeriods + 2 */
  evaluationRange?: number;
  /** The state before the first period (what `ignore` keeps). @default INSUFFICIENT_DATA */
  initialState?: AlarmState;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A resolver for the intrinsics an alarm's properties hold (AlarmName, dimension values), on a locally planned stack:
 * `Ref` and `Fn::GetAtt` of its queues (QueueName, Arn, QueueUrl), functions, tables and buckets, `Ref` of its event
 * source mappings (their UUID), and the pseudo parameters. Anything else is an error naming it.
 */
export function planResolveContext(plan: StackPlan): ResolveContext {
  const queue = (id: string) => plan.queues.find((q) => q.logicalId === id);
  const named = (id: string) => [...plan.functions, ...plan.tables, ...plan.buckets].find((r) => r.logicalId === id);
  const mapping = (id: string) => plan.mappings.find((m) => m.logicalId === id);
  const unknown = (what: string) =>
    new AlarmEvaluationError(
      `${what}: not a queue, function, table, bucket or event source mapping of the planned stack ${plan.stackName}`,
    );
  return {
    pseudo: {
      'AWS::Region': plan.region,
      'AWS::AccountId': plan.accountId,
      'AWS::Partition': 'aws',
      'AWS::StackName': plan.stackName,
      'AWS::URLSuffix': 'amazonaws.com',
    },
    ref: (id) => {
      const q = queue(id);
      if (q) return q.url;
      const r = named(id);
      if (r) return r.name;
      const m = mapping(id);
      if (m) return m.uuid;
      throw unknown(`Ref ${id}`);
    },
    getAtt: (id, attribute) => {
      const q = queue(id);
      if (q && attribute === 'QueueName') return q.name;
      if (q && attribute === 'Arn') return q.arn;
      if (q && attribute === 'QueueUrl') return q.url;
      const r = named(id);
      if (r && attribute === 'Arn') return r.arn;
      throw unknown(`Fn::GetAtt ${id}.${attribute}`);
    },
  };
}

/** Without a plan: literals only; an intrinsic is an error that says what to pass. */
const LITERALS_ONLY: ResolveContext = {
  pseudo: {},
  ref: (id) => {
    throw new AlarmEvaluationError(
      `Ref ${id}: pass a ResolveContext (planResolveContext(plan)) to resolve the alarm's intrinsics`,
    );
  },
  getAtt: (id, attribute) => {
    throw new AlarmEvaluationError(
      `Fn::GetAtt ${id}.${attribute}: pass a ResolveContext (planResolveContext(plan)) to resolve the alarm's intrinsics`,
    );
  },
};

function dimensionsOf(value: unknown, where: string): Record<string, string> {
  if (value === undefined) return {};
  if (!Array.isArray(value)) throw new AlarmEvaluationError(`${where}: Dimensions is not a list`);
  return Object.fromEntries(
    value.map((d, i) => {
      if (!isRecord(d) || typeof d.Name !== 'string' || typeof d.Value !== 'string')
        throw new AlarmEvaluationError(`${where}: Dimensions[${i}] is not a { Name, Value } pair of strings`);
      return [d.Name, d.Value];
    }),
  );
}

function statisticOf(value: unknown, where: string): Statistic {
  if (typeof value === 'string' && value in STATISTICS) return value as Statistic;
  throw new AlarmEvaluationError(
    `${where}: statistic ${JSON.stringify(value)} is not supported by the local evaluator (supported: ${Object.keys(STATISTICS).join(', ')})`,
  );
}

function positive(value: unknown, where: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0)
    throw new AlarmEvaluationError(`${where}: expected a positive number, got ${JSON.stringify(value)}`);
  return n;
}

type TemplateResource = CloudFormationTemplate['Resources'][string];

/** The alarm's name: its AlarmName resolved, else its logical ID. */
function alarmNameOf(id: string, props: Record<string, unknown>, context: ResolveContext): string {
  return props.AlarmName === undefined
    ? id
    : String(resolveValue(props.AlarmName, context, `${id}.Properties.AlarmName`));
}

/** The template's alarm with logical ID `alarm`, else the one whose AlarmName is `alarm`. */
function findAlarm(
  template: CloudFormationTemplate,
  alarm: string,
  context: ResolveContext,
): [string, TemplateResource] {
  const alarms = Object.entries(template.Resources).filter(([, r]) => r.Type === 'AWS::CloudWatch::Alarm');
  const found =
    alarms.find(([id]) => id === alarm) ??
    alarms.find(([id, r]) => alarmNameOf(id, r.Properties ?? {}, context) === alarm);
  if (!found)
    throw new AlarmEvaluationError(
      `the template has no AWS::CloudWatch::Alarm named or with logical ID "${alarm}" (it has ${alarms.length} alarm${alarms.length === 1 ? '' : 's'})`,
    );
  return found;
}

/** The alarm's comparison, threshold, evaluation periods and missing-data rule, each checked. */
function readAlarmRule(
  props: Record<string, unknown>,
  where: string,
): Pick<AlarmDefinition, 'comparisonOperator' | 'threshold' | 'evaluationPeriods' | 'treatMissingData'> {
  const comparisonOperator = props.ComparisonOperator;
  if (typeof comparisonOperator !== 'string' || !(comparisonOperator in COMPARISONS)) {
    throw new AlarmEvaluationError(
      `${where}: ComparisonOperator ${JSON.stringify(comparisonOperator)} is not supported by the local evaluator (supported: ${Object.keys(COMPARISONS).join(', ')})`,
    );
  }
  if (props.ThresholdMetricId !== undefined)
    throw new AlarmEvaluationError(
      `${where}: ThresholdMetricId (an anomaly detection band) is not supported by the local evaluator`,
    );
  const evaluationPeriods = positive(props.EvaluationPeriods, `${where}.EvaluationPeriods`);
  const threshold = Number(props.Threshold);
  if (props.Threshold === undefined || !Number.isFinite(threshold))
    throw new AlarmEvaluationError(`${where}: Threshold ${JSON.stringify(props.Threshold)} is not a number`);
  const treat = props.TreatMissingData ?? TreatMissingData.missing;
  if (typeof treat !== 'string' || !(treat in TreatMissingData))
    throw new AlarmEvaluationError(
      `${where}: TreatMissingData ${JSON.stringify(treat)} is not one of ${Object.keys(TreatMissingData).join(', ')}`,
    );
  return {
    comparisonOperator: comparisonOperator as ComparisonOperator,
    threshold,
    evaluationPeriods,
    treatMissingData: treat as TreatMissingData,
  };
}

type AlarmQueries = Pick<AlarmDefinition, 'metrics' | 'expressions'> & { returnId: string | undefined };

/** A metric math alarm's Metrics: its MetricStat queries, its expressions and the one that returns data. */
function readMetricsList(entries: unknown[], where: string): AlarmQueries {
  const metrics: MetricStatQuery[] = [];
  const expressions: ExpressionQuery[] = [];
  let returnId: string | undefined;
  entries.forEach((entry, i) => {
    const at = `${where}.Metrics[${i}]`;
    if (!isRecord(entry) || typeof entry.Id !== 'string') throw new AlarmEvaluationError(`${at}: an entry needs an Id`);
    if (entry.ReturnData !== false) {
      if (returnId !== undefined && entry.ReturnData === true)
        throw new AlarmEvaluationError(`${where}: more than one entry has ReturnData true (${returnId}, ${entry.Id})`);
      if (entry.ReturnData === true || returnId === undefined) returnId = entry.Id;
    }
    if (typeof entry.Expression === 'string') {
      expressions.push({ id: entry.Id, expression: entry.Expression });
    } else if (isRecord(entry.MetricStat) && isRecord(entry.MetricStat.Metric)) {
      const m = entry.MetricStat.Metric;
      metrics.push({
        id: entry.Id,
        namespace: String(m.Namespace),
        metricName: String(m.MetricName),
        dimensions: dimensionsOf(m.Dimensions, at),
        stat: statisticOf(entry.MetricStat.Stat, at),
        periodSeconds: positive(entry.MetricStat.Period, `${at}.MetricStat.Period`),
      });
    } else {
      throw new AlarmEvaluationError(`${at}: neither an Expression nor a MetricStat`);
    }
  });
  return { metrics, expressions, returnId };
}

/** A plain metric alarm's one metric, as the query m1. */
function readSingleMetric(
  props: Record<string, unknown>,
  logicalId: string,
  where: string,
  context: ResolveContext,
): AlarmQueries {
  if (props.ExtendedStatistic !== undefined)
    throw new AlarmEvaluationError(
      `${where}: ExtendedStatistic ${JSON.stringify(props.ExtendedStatistic)} (a percentile) is not supported by the local evaluator`,
    );
  const metric: MetricStatQuery = {
    id: 'm1',
    namespace: String(props.Namespace),
    metricName: String(props.MetricName),
    dimensions: dimensionsOf(resolveValue(props.Dimensions, context, `${logicalId}.Properties.Dimensions`), where),
    stat: statisticOf(props.Statistic, where),
    periodSeconds: positive(props.Period, `${where}.Period`),
  };
  return { metrics: [metric], expressions: [], returnId: metric.id };
}

/** The one period every query shares (CloudWatch requires it). */
function onePeriod(metrics: MetricStatQuery[], where: string): number {
  const periods = [...new Set(metrics.map((m) => m.periodSeconds))];
  if (periods.length !== 1)
    throw new AlarmEvaluationError(
      `${where}: its metrics have ${periods.length === 0 ? 'no' : 'different'} periods (${periods.join(', ')}); CloudWatch needs one period`,
    );
  return periods[0];
}

/**
 * The alarm named `alarm` (its AlarmName or its logical ID) in the template, with its intrinsics resolved by
 * `context` (planResolveContext(plan) for a locally planned stack).
 * @throws AlarmEvaluationError when there is no such alarm, or it is not one this evaluator can run (an anomaly
 *   detection band, a percentile, metrics of different periods).
 */
export function readAlarm(
  template: CloudFormationTemplate,
  alarm: string,
  context: ResolveContext = LITERALS_ONLY,
): AlarmDefinition {
  const [logicalId, resource] = findAlarm(template, alarm, context);
  const props = resource.Properties ?? {};
  const where = `alarm ${logicalId}`;
  const rule = readAlarmRule(props, where);
  const { metrics, expressions, returnId } = Array.isArray(props.Metrics)
    ? readMetricsList(resolveValue(props.Metrics, context, `${logicalId}.Properties.Metrics`) as unknown[], where)
    : readSingleMetric(props, logicalId, where, context);
  if (returnId === undefined) throw new AlarmEvaluationError(`${where}: no entry of Metrics returns data`);
  const periodSeconds = onePeriod(metrics, where);
  return {
    logicalId,
    alarmName: alarmNameOf(logicalId, props, context),
    threshold: rule.threshold,
    comparisonOperator: rule.comparisonOperator,
    evaluationPeriods: rule.evaluationPeriods,
    // Checked after the queries and the period, so an alarm with several bad properties is told of the same one first.
    datapointsToAlarm:
      props.DatapointsToAlarm === undefined
        ? rule.evaluationPeriods
        : positive(props.DatapointsToAlarm, `${where}.DatapointsToAlarm`),
    treatMissingData: rule.treatMissingData,
    periodSeconds,
    returnId,
    metrics,
    expressions,
  };
}

/**
 * The alarm on a shorter clock, so a local run need not last its real evaluation interval: every query's period
 * becomes `periodSeconds`, and the alarm looks at `evaluationPeriods` of them; DatapointsToAlarm keeps its share of
 * the evaluation periods (M of N becomes round(M x n / N), at least 1) unless given. Threshold, comparison, missing
 * data and expressions are unchanged, so what is evaluated is the alarm's own logic.
 */
export function scaleAlarm(
  alarm: AlarmDefinition,
  scale: { periodSeconds: number; evaluationPeriods: number; datapointsToAlarm?: number },
): AlarmDefinition {
  const { periodSeconds, evaluationPeriods } = scale;
  if (!(periodSeconds > 0) || !Number.isInteger(evaluationPeriods) || evaluationPeriods < 1) {
    throw new AlarmEvaluationError(
      `scaleAlarm: periodSeconds must be above 0 and evaluationPeriods a whole number of at least 1; got ${periodSeconds} and ${evaluationPeriods}`,
    );
  }
  const datapointsToAlarm =
    scale.datapointsToAlarm ??
    Math.max(1, Math.round((alarm.datapointsToAlarm * evaluationPeriods) / alarm.evaluationPeriods));
  if (datapointsToAlarm > evaluationPeriods)
    throw new AlarmEvaluationError(
      `scaleAlarm: datapointsToAlarm ${datapointsToAlarm} is more than evaluationPeriods ${evaluationPeriods}`,
    );
  return {
    ...alarm,
    periodSeconds,
    evaluationPeriods,
    datapointsToAlarm,
    metrics: alarm.metrics.map((m) => ({ ...m, periodSeconds })),
  };
}

// ---------------------------------------------------------------------------------------------------------------------
// Metric math: a time series is one value (or none) per period of the evaluation; a scalar is one number.

type Series = (number | undefined)[];
type Value = { scalar: number } | { series: Series };

/** A parsed metric math expression (parseMetricMath). */
export type MetricMathNode =
  | { kind: 'number'; value: number }
  | { kind: 'id'; id: string }
  | { kind: 'neg'; operand: MetricMathNode }
  | { kind: 'binary'; op: BinaryOp; left: MetricMathNode; right: MetricMathNode }
  | { kind: 'call'; fn: 'IF' | 'FILL'; args: MetricMathNode[] };

type BinaryOp = '+' | '-' | '*' | '/' | '==' | '!=' | '<' | '>' | '<=' | '>=' | 'AND' | 'OR';

const SUPPORTED = 'numbers, ids, + - * /, comparisons (== != < > <= >=), AND/OR, IF(cond, a, b) and FILL(m, value)';

type Token =
  | { kind: 'number'; value: number; at: number }
  | { kind: 'name'; text: string; at: number }
  | { kind: 'op'; text: string; at: number };

function tokenize(expression: string): Token[] {
  const unsupported = (what: string, description: string) =>
    new UnsupportedMetricMathError(
      what,
      expression,
      `metric math ${description} is not supported by the local alarm evaluator (it supports ${SUPPORTED}): ${expression}`,
    );
  const tokens: Token[] = [];
  let i = 0;
  while (i < expression.length) {
    const rest = expression.slice(i);
    const space = /^\s+/.exec(rest);
    if (space) {
      i += space[0].length;
      continue;
    }
    const number = /^(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/.exec(rest);
    if (number) {
      tokens.push({ kind: 'number', value: Number(number[0]), at: i });
      i += number[0].length;
      continue;
    }
    const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(rest);
    if (name) {
      tokens.push({ kind: 'name', text: name[0], at: i });
      i += name[0].length;
      continue;
    }
    const op = /^(==|!=|<=|>=|&&|\|\||[-+*/()<>,])/.exec(rest);
    if (op) {
      tokens.push({ kind: 'op', text: op[0], at: i });
      i += op[0].length;
      continue;
    }
    if (rest[0] === '"' || rest[0] === "'" || rest[0] === '\u201c')
      throw unsupported('string', 'strings (as in METRICS("...") or SEARCH)');
    if (rest[0] === '[' || rest[0] === ']') throw unsupported('[', 'arrays of time series ([m1, m2])');
    throw unsupported(rest[0], `operator ${rest[0]}`);
  }
  return tokens;
}

/** Parses the supported subset; anything else throws UnsupportedMetricMathError (a function named by its name). */
export function parseMetricMath(expression: string): MetricMathNode {
  return new MetricMathParser(expression, tokenize(expression)).parse();
}

/** The metric math functions the evaluator runs, with how many arguments each takes (least, most). */
const FUNCTIONS = { IF: [2, 3], FILL: [2, 2] } as const;

/**
 * A recursive-descent parser over the tokens, one method per precedence level, loosest first: OR, AND, comparisons,
 * + -, * /, then a primary (a number, a parenthesised expression, unary minus, an id or a call).
 */
class MetricMathParser {
  private pos = 0;

  constructor(
    private readonly expression: string,
    private readonly tokens: Token[],
  ) {}

  parse(): MetricMathNode {
    const tree = this.or();
    const left = this.tokens[this.pos];
    if (left) throw this.syntax(`unexpected "${left.kind === 'number' ? left.value : left.text}"`);
    return tree;
  }

  private syntax(message: string): AlarmEvaluationError {
    const at = this.tokens[this.pos]?.at ?? this.expression.length;
    return new AlarmEvaluationError(`metric math: ${message} at character ${at} of: ${this.expression}`);
  }

  /** The next token if it is one of `ops` (an operator, or a word operator such as AND), else undefined. */
  private peekOp(...ops: string[]): string | undefined {
    const t = this.tokens[this.pos];
    if (t?.kind === 'op' && ops.includes(t.text)) return t.text;
    if (t?.kind === 'name' && ops.includes(t.text)) return t.text;
    return undefined;
  }

  private expect(op: string): void {
    if (!this.peekOp(op)) throw this.syntax(`expected "${op}"`);
    this.pos++;
  }

  /** A left-associative chain of `next` operands joined by any of `ops` (each token mapped to its operator). */
  private binaryLevel(next: () => MetricMathNode, ops: Record<string, BinaryOp>): MetricMathNode {
    let left = next();
    for (let op = this.peekOp(...Object.keys(ops)); op; op = this.peekOp(...Object.keys(ops))) {
      this.pos++;
      left = { kind: 'binary', op: ops[op], left, right: next() };
    }
    return left;
  }

  private or(): MetricMathNode {
    return this.binaryLevel(() => this.and(), { OR: 'OR', '||': 'OR' });
  }

  private and(): MetricMathNode {
    return this.binaryLevel(() => this.comparison(), { AND: 'AND', '&&': 'AND' });
  }

  private comparison(): MetricMathNode {
    return this.binaryLevel(() => this.additive(), {
      '==': '==',
      '!=': '!=',
      '<=': '<=',
      '>=': '>=',
      '<': '<',
      '>': '>',
    });
  }

  private additive(): MetricMathNode {
    return this.binaryLevel(() => this.multiplicative(), { '+': '+', '-': '-' });
  }

  private multiplicative(): MetricMathNode {
    return this.binaryLevel(() => this.primary(), { '*': '*', '/': '/' });
  }

  private primary(): MetricMathNode {
    const t = this.tokens[this.pos];
    if (!t) throw this.syntax('unexpected end of expression');
    if (t.kind === 'number') {
      this.pos++;
      return { kind: 'number', value: t.value };
    }
    if (t.kind === 'op' && t.text === '(') {
      this.pos++;
      const inner = this.or();
      this.expect(')');
      return inner;
    }
    if (t.kind === 'op' && t.text === '-') {
      this.pos++;
      return { kind: 'neg', operand: this.primary() };
    }
    if (t.kind === 'name') {
      this.pos++;
      return this.named(t.text);
    }
    throw this.syntax(`unexpected "${t.text}"`);
  }

  /** After a name: an id (lowercase, not called), a call of IF or FILL, or an unsupported function or name. */
  private named(name: string): MetricMathNode {
    const next = this.tokens[this.pos];
    const isCall = next?.kind === 'op' && next.text === '(';
    if (/^[a-z]/.test(name) && !isCall) return { kind: 'id', id: name };
    if (isCall && (name === 'IF' || name === 'FILL')) return this.call(name);
    if (isCall)
      throw new UnsupportedMetricMathError(
        name,
        this.expression,
        `metric math function ${name} is not supported by the local alarm evaluator (it supports ${SUPPORTED}): ${this.expression}`,
      );
    throw new UnsupportedMetricMathError(
      name,
      this.expression,
      `metric math name ${name} is not supported by the local alarm evaluator (it supports ${SUPPORTED}; an id starts with a lowercase letter): ${this.expression}`,
    );
  }

  /** A call's parenthesised arguments (the position is at its "("), checked against how many the function takes. */
  private call(fn: keyof typeof FUNCTIONS): MetricMathNode {
    this.pos++;
    const args: MetricMathNode[] = [];
    if (!this.peekOp(')')) {
      args.push(this.or());
      while (this.peekOp(',')) {
        this.pos++;
        args.push(this.or());
      }
    }
    this.expect(')');
    const [min, max] = FUNCTIONS[fn];
    if (args.length < min || args.length > max)
      throw new AlarmEvaluationError(
        `metric math: ${fn} takes ${min === max ? min : `${min} or ${max}`} arguments, got ${args.length}: ${this.expression}`,
      );
    return { kind: 'call', fn, args };
  }
}

const BINARY: Record<BinaryOp, (a: number, b: number) => number | undefined> = {
  '+': (a, b) => a + b,
  '-': (a, b) => a - b,
  '*': (a, b) => a * b,
  // The guide: a datapoint that would divide by zero is dropped.
  '/': (a, b) => (b === 0 ? undefined : a / b),
  '==': (a, b) => Number(a === b),
  '!=': (a, b) => Number(a !== b),
  '<': (a, b) => Number(a < b),
  '>': (a, b) => Number(a > b),
  '<=': (a, b) => Number(a <= b),
  '>=': (a, b) => Number(a >= b),
  AND: (a, b) => Number(a !== 0 && b !== 0),
  OR: (a, b) => Number(a !== 0 || b !== 0),
};

function binary(op: BinaryOp, left: Value, right: Value, length: number): Value {
  const f = BINARY[op];
  if ('scalar' in left && 'scalar' in right) {
    const v = f(left.scalar, right.scalar);
    if (v === undefined)
      throw new AlarmEvaluationError(`metric math: ${left.scalar} ${op} ${right.scalar} divides by zero`);
    return { scalar: v };
  }
  const at = (v: Value, i: number) => ('scalar' in v ? v.scalar : v.series[i]);
  const bothSeries = 'series' in left && 'series' in right;
  const series: Series = [];
  for (let i = 0; i < length; i++) {
    const [a, b] = [at(left, i), at(right, i)];
    if (a === undefined && b === undefined) series.push(undefined);
    // Two time series: a value missing in one is 0 (the guide, for arithmetic and for comparisons). Against a scalar,
    // a time series keeps its gaps.
    else if (a === undefined || b === undefined) series.push(bothSeries ? f(a ?? 0, b ?? 0) : undefined);
    else series.push(f(a, b));
  }
  return { series };
}

function evaluateNode(
  node: MetricMathNode,
  resolveId: (id: string) => Series,
  length: number,
  expression: string,
): Value {
  const ev = (n: MetricMathNode) => evaluateNode(n, resolveId, length, expression);
  switch (node.kind) {
    case 'number':
      return { scalar: node.value };
    case 'id':
      return { series: resolveId(node.id) };
    case 'neg': {
      const v = ev(node.operand);
      return 'scalar' in v
        ? { scalar: -v.scalar }
        : { series: v.series.map((x) => (x === undefined ? undefined : -x)) };
    }
    case 'binary':
      return binary(node.op, ev(node.left), ev(node.right), length);
    case 'call': {
      if (node.fn === 'FILL') {
        const [m, filler] = node.args.map(ev);
        if ('scalar' in m)
          throw new AlarmEvaluationError(`metric math: FILL needs a time series as its first argument: ${expression}`);
        return { series: m.series.map((x, i) => x ?? ('scalar' in filler ? filler.scalar : filler.series[i])) };
      }
      const [condition, whenTrue, whenFalse] = node.args.map(ev);
      const branch = (v: Value | undefined, i: number) =>
        v === undefined ? undefined : 'scalar' in v ? v.scalar : v.series[i];
      if ('scalar' in condition) {
        const chosen = condition.scalar !== 0 ? whenTrue : whenFalse;
        return chosen ?? { series: Array<undefined>(length).fill(undefined) };
      }
      // The guide's table: a missing condition drops the datapoint; a true one missing its value is 0; a false one
      // missing its value (or with no third argument) is dropped.
      return {
        series: condition.series.map((c, i) => {
          if (c === undefined) return undefined;
          return c !== 0 ? (branch(whenTrue, i) ?? 0) : branch(whenFalse, i);
        }),
      };
    }
  }
}

const sameDimensions = (a: Record<string, string>, b: Record<string, string>) => {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => b[k] === a[k]);
};

/** The samples of one MetricStat, aggregated by its statistic over each period; undefined where it has none. */
export function datapoints(
  query: MetricStatQuery,
  samples: readonly MetricSample[],
  startMs: number,
  periods: number,
): Series {
  const periodMs = query.periodSeconds * 1000;
  const buckets: number[][] = Array.from({ length: periods }, () => []);
  for (const s of samples) {
    if (
      s.namespace !== query.namespace ||
      s.metricName !== query.metricName ||
      !sameDimensions(s.dimensions, query.dimensions)
    )
      continue;
    const i = Math.floor((s.timestamp - startMs) / periodMs);
    if (i >= 0 && i < periods) buckets[i].push(s.value);
  }
  return buckets.map((b) => (b.length === 0 ? undefined : STATISTICS[query.stat](b)));
}

/** Every query's values over `periods` periods from `startMs`, expressions evaluated on the metrics (and each other). */
export function evaluateQueries(
  alarm: AlarmDefinition,
  samples: readonly MetricSample[],
  startMs: number,
  periods: number,
): Record<string, Series> {
  const values: Record<string, Series> = {};
  for (const m of alarm.metrics) values[m.id] = datapoints(m, samples, startMs, periods);
  const parsed = new Map(alarm.expressions.map((e) => [e.id, { ...e, tree: parseMetricMath(e.expression) }]));
  const resolving = new Set<string>();
  const resolveId = (id: string): Series => {
    if (values[id]) return values[id];
    const e = parsed.get(id);
    if (!e)
      throw new AlarmEvaluationError(
        `alarm ${alarm.logicalId}: an expression refers to "${id}", which is none of its queries (${[...alarm.metrics.map((m) => m.id), ...parsed.keys()].join(', ')})`,
      );
    if (resolving.has(id))
      throw new AlarmEvaluationError(`alarm ${alarm.logicalId}: expression "${id}" refers to itself`);
    resolving.add(id);
    const v = evaluateNode(e.tree, resolveId, periods, e.expression);
    resolving.delete(id);
    if ('scalar' in v)
      throw new AlarmEvaluationError(
        `alarm ${alarm.logicalId}: expression "${id}" is a scalar; CloudWatch needs every expression an alarm uses to be a time series: ${e.expression}`,
      );
    values[id] = v.series;
    return v.series;
  };
  for (const id of parsed.keys()) resolveId(id);
  return values;
}

/**
 * The alarm's state at the end of a period, from the breaching flags of the evaluation range that ends there (oldest
 * first; undefined = missing), as the CloudWatch user guide describes it.
 */
export function stateOf(
  range: readonly (boolean | undefined)[],
  alarm: Pick<AlarmDefinition, 'evaluationPeriods' | 'datapointsToAlarm' | 'treatMissingData'>,
  previous: AlarmState,
): AlarmState {
  const n = alarm.evaluationPeriods;
  const m = alarm.datapointsToAlarm;
  const existing = range.filter((b): b is boolean => b !== undefined);
  const breaches = (points: boolean[]) => points.filter(Boolean).length;
  // Enough real datapoints: the most recent N of them decide, and missing data does not matter.
  if (existing.length >= n) return breaches(existing.slice(-n)) >= m ? AlarmState.ALARM : AlarmState.OK;
  // Too few: the missing ones are filled as few times as possible, as TreatMissingData says.
  const filled = n - existing.length;
  switch (alarm.treatMissingData) {
    case TreatMissingData.breaching:
      return breaches(existing) + filled >= m ? AlarmState.ALARM : AlarmState.OK;
    case TreatMissingData.notBreaching:
      return breaches(existing) >= m ? AlarmState.ALARM : AlarmState.OK;
    default: {
      const keep = alarm.treatMissingData === TreatMissingData.ignore;
      if (existing.length === 0) return keep ? previous : AlarmState.INSUFFICIENT_DATA;
      if (breaches(existing) >= m) return AlarmState.ALARM;
      if (existing.some((b) => !b)) return AlarmState.OK;
      // Only breaching datapoints, too few of them: `missing` alarms when the oldest of the range breaches (the guide's
      // "X - - - -" row), else it cannot tell; `ignore` keeps its state.
      if (keep) return previous;
      return range[0] === true ? AlarmState.ALARM : AlarmState.INSUFFICIENT_DATA;
    }
  }
}

/**
 * Evaluates the alarm at the end of every whole period between `fromMs` and `toMs` (periods are aligned to multiples
 * of the alarm's period since the epoch, as CloudWatch aligns them; periods before the first are missing data).
 */
export function evaluateAlarm(
  alarm: AlarmDefinition,
  samples: readonly MetricSample[],
  window: { fromMs: number; toMs: number },
  options: EvaluateOptions = {},
): PeriodEvaluation[] {
  const periodMs = alarm.periodSeconds * 1000;
  const startMs = Math.floor(window.fromMs / periodMs) * periodMs;
  const periods = Math.max(0, Math.floor((window.toMs - startMs) / periodMs));
  const range = options.evaluationRange ?? alarm.evaluationPeriods + 2;
  if (!Number.isInteger(range) || range < alarm.evaluationPeriods)
    throw new AlarmEvaluationError(
      `evaluationRange must be a whole number of at least evaluationPeriods (${alarm.evaluationPeriods}); got ${range}`,
    );
  const values = evaluateQueries(alarm, samples, startMs, periods);
  const returned = values[alarm.returnId];
  if (!returned)
    throw new AlarmEvaluationError(
      `alarm ${alarm.logicalId}: its returned query "${alarm.returnId}" is none of its queries`,
    );
  const compare = COMPARISONS[alarm.comparisonOperator];
  const breaching = returned.map((v) => (v === undefined ? undefined : compare(v, alarm.threshold)));
  const out: PeriodEvaluation[] = [];
  let state = options.initialState ?? AlarmState.INSUFFICIENT_DATA;
  for (let i = 0; i < periods; i++) {
    const from = i - range + 1;
    const flags = [
      ...Array<undefined>(Math.max(0, -from)).fill(undefined),
      ...breaching.slice(Math.max(0, from), i + 1),
    ];
    state = stateOf(flags, alarm, state);
    out.push({
      startMs: startMs + i * periodMs,
      endMs: startMs + (i + 1) * periodMs,
      values: Object.fromEntries(Object.entries(values).map(([id, series]) => [id, series[i]])),
      value: returned[i],
      breaching: breaching[i],
      state,
    });
  }
  return out;
}
