/**
 * The Kubernetes kinds the chart may emit, keyed "apiVersion/kind": the
 * kubernetes-models class that validates each one (types, required fields,
 * formats) and, in `KnownKinds`, its TypeScript interface, which strict-keys.ts
 * walks to catch misspelled fields the JSON-schema validators let through.
 * A kind missing here fails validation: add it deliberately.
 */
import { Deployment, type IDeployment } from "kubernetes-models/apps/v1/Deployment";
import { HorizontalPodAutoscaler, type IHorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler";
import { PodDisruptionBudget, type IPodDisruptionBudget } from "kubernetes-models/policy/v1/PodDisruptionBudget";
import { Role, type IRole } from "kubernetes-models/rbac.authorization.k8s.io/v1/Role";
import { RoleBinding, type IRoleBinding } from "kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding";
import { NetworkPolicy, type INetworkPolicy } from "kubernetes-models/networking.k8s.io/v1/NetworkPolicy";
import { ConfigMap, type IConfigMap } from "kubernetes-models/v1/ConfigMap";
import { Namespace, type INamespace } from "kubernetes-models/v1/Namespace";
import { Secret, type ISecret } from "kubernetes-models/v1/Secret";
import { Service, type IService } from "kubernetes-models/v1/Service";
import { ServiceAccount, type IServiceAccount } from "kubernetes-models/v1/ServiceAccount";
import { PrometheusRule, type IPrometheusRule } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule";
import { ServiceMonitor, type IServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";

export interface KnownKinds {
  "apps/v1/Deployment": IDeployment;
  "autoscaling/v2/HorizontalPodAutoscaler": IHorizontalPodAutoscaler;
  "policy/v1/PodDisruptionBudget": IPodDisruptionBudget;
  "rbac.authorization.k8s.io/v1/Role": IRole;
  "rbac.authorization.k8s.io/v1/RoleBinding": IRoleBinding;
  "networking.k8s.io/v1/NetworkPolicy": INetworkPolicy;
  "v1/ConfigMap": IConfigMap;
  "v1/Namespace": INamespace;
  "v1/Secret": ISecret;
  "v1/Service": IService;
  "v1/ServiceAccount": IServiceAccount;
  "monitoring.coreos.com/v1/ServiceMonitor": IServiceMonitor;
  "monitoring.coreos.com/v1/PrometheusRule": IPrometheusRule;
}

type Validatable = new (data: never) => { validate(): void };

export const MODEL_CLASSES: Record<keyof KnownKinds, Validatable> = {
  "apps/v1/Deployment": Deployment,
  "autoscaling/v2/HorizontalPodAutoscaler": HorizontalPodAutoscaler,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "rbac.authorization.k8s.io/v1/Role": Role,
  "rbac.authorization.k8s.io/v1/RoleBinding": RoleBinding,
  "networking.k8s.io/v1/NetworkPolicy": NetworkPolicy,
  "v1/ConfigMap": ConfigMap,
  "v1/Namespace": Namespace,
  "v1/Secret": Secret,
  "v1/Service": Service,
  "v1/ServiceAccount": ServiceAccount,
  "monitoring.coreos.com/v1/ServiceMonitor": ServiceMonitor,
  "monitoring.coreos.com/v1/PrometheusRule": PrometheusRule,
};

export const kindKey = (o: { apiVersion?: unknown; kind?: unknown }) => `${String(o.apiVersion)}/${String(o.kind)}`;
