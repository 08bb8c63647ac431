// Local IAM enforcement: per-role credentials, request descriptions, the iam-simulate authorizer and the auth gateway
// that puts them in front of each local AWS-protocol server.
export { ADMIN, assumedRoleArnOf, CredentialDirectory, CredentialError, rolePrincipal } from './credentials';
export type { AdminPrincipal, Principal, RolePrincipal, ServicePrincipal, SessionCredentials } from './credentials';
export { describeRequest, isSqsJsonRequest, RequestDescriptionError, requestNeedsBody } from './requests';
export type { AwsService, HttpRequestParts, RequestDescription, RequestPlan, RequiredPermission } from './requests';
export { Authorizer } from './authorizer';
export type { AuthorizationRequest, AuthorizerOptions, Decision, Denial, DenialReason } from './authorizer';
export { accessKeyOf, startAuthGateway, TRANSPORT_HEADER } from './gateway';
export type { AuthGatewayOptions } from './gateway';
