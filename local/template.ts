// Deploy parity, part one: reads the synthesized CloudFormation template and resolves its intrinsic functions to the
// local names, URLs and ARNs, as CloudFormation would at deploy time.
import { readFileSync } from 'node:fs';

export interface TemplateResource {
  Type: string;
  Properties?: Record<string, unknown>;
  DependsOn?: string | string[];
  Condition?: string;
  Metadata?: Record<string, unknown>;
}

export interface CloudFormationTemplate {
  Resources: Record<string, TemplateResource>;
  Outputs?: Record<string, { Value: unknown; Description?: string; Export?: unknown }>;
  Parameters?: Record<string, { Type: string; Default?: unknown }>;
  Conditions?: Record<string, unknown>;
  Mappings?: Record<string, Record<string, Record<string, unknown>>>;
}

export class TemplateError extends Error {
  constructor(
    message: string,
    public readonly path: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'TemplateError';
  }
}

export function loadTemplate(file: string): CloudFormationTemplate {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new TemplateError(`cannot read template ${file}: ${(error as Error).message}`, file, { cause: error });
  }
  if (
    typeof parsed !== 'object' ||
    parsed === null ||
    typeof (parsed as CloudFormationTemplate).Resources !== 'object'
  ) {
    throw new TemplateError(`template ${file} has no Resources section`, file);
  }
  return parsed as CloudFormationTemplate;
}

/** What the resolver needs to know about the deployed (here: local) stack. */
export interface ResolveContext {
  /** Value of `Ref` on a resource or parameter. */
  ref(logicalId: string): string;
  /** Value of `Fn::GetAtt`. */
  getAtt(logicalId: string, attribute: string): string;
  /** Pseudo parameters such as AWS::Region. */
  pseudo: Record<string, string>;
  conditions?: Record<string, boolean>;
  mappings?: CloudFormationTemplate['Mappings'];
  /** A stand-in for an intrinsic the resolver does not know; absent, such an intrinsic is a TemplateError. */
  unsupported?: (fn: string, path: string) => string;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Marker CloudFormation uses to drop a property inside Fn::If. */
const NO_VALUE = Symbol('AWS::NoValue');

function asString(value: unknown, path: string): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  throw new TemplateError(`${path}: expected a string, got ${JSON.stringify(value)}`, path);
}

/**
 * Resolves every intrinsic in a value. Supported: Ref, Fn::GetAtt, Fn::Join, Fn::Sub, Fn::Select, Fn::Split,
 * Fn::If, Fn::Equals, Fn::Not, Fn::And, Fn::Or, Fn::FindInMap, Fn::Base64, AWS::NoValue.
 * @throws TemplateError naming the path of an intrinsic it does not know.
 */
export function resolveValue(value: unknown, ctx: ResolveContext, path = '$'): unknown {
  const resolved = resolveInner(value, ctx, path);
  return resolved === NO_VALUE ? undefined : resolved;
}

function resolveInner(value: unknown, ctx: ResolveContext, path: string): unknown {
  if (Array.isArray(value)) {
    return value.map((v, i) => resolveInner(v, ctx, `${path}[${i}]`)).filter((v) => v !== NO_VALUE);
  }
  if (!isObject(value)) return value;
  const keys = Object.keys(value);
  if (keys.length === 1 && (keys[0] === 'Ref' || keys[0].startsWith('Fn::') || keys[0] === 'Condition')) {
    return resolveIntrinsic(keys[0], value[keys[0]], ctx, `${path}.${keys[0]}`);
  }
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    const v = resolveInner(value[key], ctx, `${path}.${key}`);
    if (v !== NO_VALUE) out[key] = v;
  }
  return out;
}

function resolveRef(name: string, ctx: ResolveContext): string | typeof NO_VALUE {
  if (name === 'AWS::NoValue') return NO_VALUE;
  if (name.startsWith('AWS::')) {
    const v = ctx.pseudo[name];
    if (v === undefined) throw new TemplateError(`unknown pseudo parameter ${name}`, name);
    return v;
  }
  return ctx.ref(name);
}

function condition(name: string, ctx: ResolveContext, path: string): boolean {
  const v = ctx.conditions?.[name];
  if (v === undefined) throw new TemplateError(`${path}: unknown condition ${name}`, path);
  return v;
}

function resolveIntrinsic(fn: string, arg: unknown, ctx: ResolveContext, path: string): unknown {
  switch (fn) {
    case 'Ref':
      return resolveRef(asString(arg, path), ctx);
    case 'Condition':
      return condition(asString(arg, path), ctx, path);
    case 'Fn::GetAtt': {
      const [id, ...attr] = Array.isArray(arg) ? (arg as string[]) : asString(arg, path).split('.');
      return ctx.getAtt(id, attr.join('.'));
    }
    case 'Fn::Join': {
      const [sep, list] = arg as [string, unknown];
      const items = resolveInner(list, ctx, path) as unknown[];
      return items.map((v, i) => asString(v, `${path}[${i}]`)).join(sep);
    }
    case 'Fn::Sub': {
      const [template, vars] = typeof arg === 'string' ? [arg, {}] : (arg as [string, Record<string, unknown>]);
      const locals = resolveInner(vars, ctx, path) as Record<string, unknown>;
      return template.replace(/\$\{(!?)([^}]+)\}/g, (_m, bang: string, name: string) => {
        if (bang) return `\${${name}}`;
        if (name in locals) return asString(locals[name], `${path}.${name}`);
        if (name.includes('.') && !name.startsWith('AWS::')) {
          const [id, ...attr] = name.split('.');
          return ctx.getAtt(id, attr.join('.'));
        }
        return asString(resolveRef(name, ctx), `${path}.${name}`);
      });
    }
    case 'Fn::Select': {
      const [index, list] = arg as [unknown, unknown];
      const items = resolveInner(list, ctx, path) as unknown[];
      const i = Number(resolveInner(index, ctx, path));
      if (!Array.isArray(items) || i < 0 || i >= items.length)
        throw new TemplateError(`${path}: index ${i} is out of range`, path);
      return items[i];
    }
    case 'Fn::Split': {
      const [sep, source] = arg as [string, unknown];
      return asString(resolveInner(source, ctx, path), path).split(sep);
    }
    case 'Fn::If': {
      const [cond, whenTrue, whenFalse] = arg as [string, unknown, unknown];
      return resolveInner(condition(cond, ctx, path) ? whenTrue : whenFalse, ctx, path);
    }
    case 'Fn::Equals': {
      const [a, b] = (arg as unknown[]).map((v) => resolveInner(v, ctx, path));
      return JSON.stringify(a) === JSON.stringify(b);
    }
    case 'Fn::Not':
      return !(resolveInner((arg as unknown[])[0], ctx, path) as boolean);
    case 'Fn::And':
      return (arg as unknown[]).every((v) => resolveInner(v, ctx, path) === true);
    case 'Fn::Or':
      return (arg as unknown[]).some((v) => resolveInner(v, ctx, path) === true);
    case 'Fn::FindInMap': {
      const [map, top, second] = (arg as unknown[]).map((v, i) =>
        asString(resolveInner(v, ctx, path), `${path}[${i}]`),
      );
      const v = ctx.mappings?.[map]?.[top]?.[second];
      if (v === undefined) throw new TemplateError(`${path}: no mapping ${map}.${top}.${second}`, path);
      return v;
    }
    case 'Fn::Base64':
      return Buffer.from(asString(resolveInner(arg, ctx, path), path)).toString('base64');
    default:
      // Where a value matters to no local request (an IAM policy's resource), the caller may stand one in.
      if (ctx.unsupported) return ctx.unsupported(fn, path);
      throw new TemplateError(`${path}: intrinsic function ${fn} is not supported by the local runtime`, path);
  }
}

/** The intrinsic functions resolveValue knows. */
const RESOLVED_INTRINSICS = new Set([
  'Fn::GetAtt',
  'Fn::Join',
  'Fn::Sub',
  'Fn::Select',
  'Fn::Split',
  'Fn::If',
  'Fn::Equals',
  'Fn::Not',
  'Fn::And',
  'Fn::Or',
  'Fn::FindInMap',
  'Fn::Base64',
]);

/** The first intrinsic function in a value that resolveValue does not know (Fn::ImportValue, Fn::GetAZs, ...). */
export function unsupportedIntrinsicIn(value: unknown): string | undefined {
  if (Array.isArray(value)) {
    for (const v of value) {
      const found = unsupportedIntrinsicIn(v);
      if (found) return found;
    }
    return undefined;
  }
  if (!isObject(value)) return undefined;
  const keys = Object.keys(value);
  if (keys.length === 1 && keys[0].startsWith('Fn::') && !RESOLVED_INTRINSICS.has(keys[0])) return keys[0];
  for (const v of Object.values(value)) {
    const found = unsupportedIntrinsicIn(v);
    if (found) return found;
  }
  return undefined;
}

/** Evaluates the template's Conditions section (they may refer to each other). */
export function evaluateConditions(
  template: CloudFormationTemplate,
  ctx: Omit<ResolveContext, 'conditions'>,
): Record<string, boolean> {
  const out: Record<string, boolean> = {};
  const pending = Object.entries(template.Conditions ?? {});
  const withConditions: ResolveContext = {
    ...ctx,
    get conditions() {
      return new Proxy(out, {
        get: (target, name: string) => {
          if (!(name in target)) {
            const def = template.Conditions?.[name];
            if (def !== undefined) target[name] = resolveValue(def, withConditions, `Conditions.${name}`) as boolean;
          }
          return target[name];
        },
      });
    },
  };
  for (const [name, def] of pending) {
    if (!(name in out)) out[name] = resolveValue(def, withConditions, `Conditions.${name}`) as boolean;
  }
  return out;
}
