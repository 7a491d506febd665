/**
 * @assay/task-format: reads task directories in the Harbor / OpenRSI Index format into a validated, immutable
 * TaskPlan; resolves environment templates at run time; computes task digests (through an injected directory
 * digester) and the protocol fingerprint (through an injected RFC 8785 canonicalizer). See docs/task-format.md.
 */
export { TASK_ERROR_CODES, formatProblem, problem, taskInvalidError, type TaskErrorCode, type TaskProblem } from './task-format.errors';
export type {
  AgentPlan,
  AssetRequirement,
  Author,
  EnvironmentImage,
  EnvironmentPlan,
  EnvTable,
  JsonObject,
  JsonValue,
  NetworkMode,
  NetworkPolicy,
  SchemaVersion,
  SchemaVersionSource,
  TaskFiles,
  TaskPlan,
  VerifierPlan,
} from './domain/task-plan';
export {
  compileTask,
  DEFAULT_BUILD_TIMEOUT_SEC,
  DEFAULT_SCHEMA_VERSION,
  DEFAULT_SHM_SIZE_BYTES,
  DEFAULT_VERIFIER_TIMEOUT_SEC,
  JUDGE_TEST_COMMAND,
  judgeNetworkWarnings,
  normalizeAllowedHost,
  normalizeWorkdir,
  RESERVED_CONTAINER_PATHS,
  SUPPORTED_SCHEMA_VERSIONS,
  type TaskCompileResult,
  type TaskSources,
} from './domain/compile-task';
export {
  mergeEnv,
  parseEnvTemplate,
  REDACTED,
  redactText,
  resolveEnvTemplates,
  templateNames,
  type EnvTemplate,
  type EnvTemplateParse,
  type HostEnv,
  type ResolvedEnv,
} from './domain/env-template';
export {
  DEFAULT_RUN_SETTINGS,
  DIRECTIONS,
  mergeRunSettings,
  parseRunSettingsFlags,
  RUN_SETTINGS_FLAG_NAMES,
  type Direction,
  type RunSettings,
  type RunSettingsFlags,
  type RunSettingsOverrides,
  type RunSettingsParse,
} from './domain/run-settings';
export {
  PROTOCOL_FINGERPRINT_SCHEME,
  protocolFingerprint,
  protocolFingerprintInput,
  type Canonicalizer,
  type ProtocolBudgets,
  type ProtocolFingerprintInput,
} from './domain/fingerprint';
export { findNetworkFetches, type NetworkFetch } from './domain/test-script';
export type { DirectoryDigester } from './ports/directory-digester.port';
export { computeTaskDigests, type TaskDigests } from './task-digests';
export { DEFAULT_TASK_DIR_LIMITS, loadTaskPlan, validateTaskDir, type TaskDirLimits, type TaskDirOptions, type TaskValidation } from './task-dir';
export { describePlan, summarizePlan } from './task-report';
export { isTaskTemplate, taskNameFor, templateFiles, TASK_TEMPLATES, type TaskTemplate, type TemplateFile } from './domain/templates';
export { scaffoldTask, type ScaffoldResult } from './application/scaffold';
export {
  CHECK_NAMES,
  checkTolerance,
  findDockerfileLeaks,
  findRootInterpreterRisks,
  firstFailure,
  HOSTILE_KEY,
  HOSTILE_MARKER,
  hostileVerdict,
  judgedChecks,
  median,
  plantHostile,
  type CheckName,
  type CheckResult,
  type CheckStatus,
  type JudgeOutcome,
  type ScriptFinding,
} from './domain/task-check';
