package handlers

import "github.com/gofiber/fiber/v2"

// Route is one entry of the HTTP surface: who may call it and what answers.
type Route struct {
	Method  string
	Path    string
	Access  Access
	Surface Surface
	Handler fiber.Handler
}

// routes is the whole HTTP surface in one place, with the role each route needs.
func (s *Server) routes() []Route {
	return []Route{
		{"GET", "/healthz", Public, API, s.healthz},
		{"GET", "/readyz", Public, API, s.readyz},
		{"GET", "/metrics", Public, API, s.metricsHandler()},

		{"GET", "/", Public, Page, s.home},
		{"GET", "/login", Public, Page, s.loginForm},
		{"POST", "/login", Public, Page, s.login},
		{"POST", "/logout", Member, Page, s.logout},

		// mission:begin (the mission field)
		{"GET", "/mission", Member, Page, s.missionPageHandler},
		{"GET", "/mission/stream", Member, Page, s.missionStream},
		{"GET", "/mission/drops", Member, Page, s.missionDrops},
		{"POST", "/mission/prompts", Member, Page, s.missionSubmit},
		{"POST", "/mission/prompts/:id/cancel", Member, Page, s.missionCancel},
		{"POST", "/mission/prompts/:id/retry", Member, Page, s.missionRetry},
		// mission:end

		// dashboard:begin (operator dashboard pages and fragments)
		{"GET", "/admin/deferred-operations", Operator, Page, s.dashOperationsPage},
		{"GET", "/admin/deferred-operations/list", Operator, Page, s.operationsList},
		{"GET", "/admin/deferred-operations/events", Operator, Page, s.operationsEvents},
		{"GET", "/admin/deferred-operations/:id", Operator, Page, s.operationPage},
		{"GET", "/admin/deferred-operations/:id/panel", Operator, Page, s.operationPanel},
		{"GET", "/admin/deferred-operations/:id/events", Operator, Page, s.operationEvents},
		{"POST", "/admin/deferred-operations/:id/poll", Operator, Page, s.operationPollAction},
		{"POST", "/admin/deferred-operations/:id/cancel", Operator, Page, s.operationCancelAction},
		{"GET", "/admin/jobs", Operator, Page, s.jobsPage},
		{"GET", "/admin/jobs/list", Operator, Page, s.jobsList},
		{"GET", "/admin/jobs/events", Operator, Page, s.jobsEvents},
		{"GET", "/admin/jobs/bulk", Operator, Page, s.jobsBulkConfirm},
		{"POST", "/admin/jobs/bulk", Operator, Page, s.jobsBulkAction},
		{"GET", "/admin/jobs/:id", Operator, Page, s.jobPage},
		{"GET", "/admin/jobs/:id/panel", Operator, Page, s.jobPanel},
		{"GET", "/admin/jobs/:id/events", Operator, Page, s.jobEvents},
		{"POST", "/admin/jobs/:id/cancel", Operator, Page, s.jobCancelAction},
		{"POST", "/admin/jobs/:id/retry", Operator, Page, s.jobRetryAction},
		{"GET", "/admin/health", Operator, Page, s.healthPage},
		{"GET", "/admin/health/panel", Operator, Page, s.healthPanel},
		{"POST", "/admin/health/orgs/:id/pause", Operator, Page, s.orgPauseAction},
		{"POST", "/admin/health/orgs/:id/resume", Operator, Page, s.orgResumeAction},
		{"POST", "/admin/health/models/pause", Admin, Page, s.modelPauseAction},
		{"POST", "/admin/health/models/resume", Admin, Page, s.modelResumeAction},
		{"GET", "/admin/river", Admin, Page, s.riverUI},
		{"GET", "/admin/river/*", Admin, Page, s.riverUI},
		// dashboard:end

		// registry:begin (deferred-operation registry API)
		{"GET", "/sa-core/v1/deferred-operations", Member, API, s.listOperations},
		{"GET", "/sa-core/v1/deferred-operations/:id", Member, API, s.getOperation},
		{"GET", "/sa-core/v1/deferred-operations/:id/status", Member, API, s.operationStatus},
		{"POST", "/sa-core/v1/deferred-operations/:id/poll", Member, API, s.pollOperation},
		{"POST", "/sa-core/v1/deferred-operations/:id/cancel", Member, API, s.cancelOperation},
		{"POST", "/sa-core/v1/chains", Member, API, s.submitChain},
		{"GET", "/sa-core/v1/chains/:id", Member, API, s.getChain},
		// registry:end

		{"POST", "/sa-core/v1/prompt", Member, API, s.submitPrompt},
		{"GET", "/sa-core/v1/mission/recent", Member, API, s.missionRecent},
		{"GET", "/sa-core/v1/mission/events", Member, API, s.missionEvents},
		{"GET", "/sa-core/v1/jobs", Operator, API, s.listJobs},
		{"GET", "/sa-core/v1/jobs/:id", Member, API, s.getJob},
		{"GET", "/sa-core/v1/jobs/:id/output", Member, API, s.jobOutput},
		{"GET", "/sa-core/v1/jobs/:id/output/events", Member, API, s.jobOutputEvents},
		{"POST", "/sa-core/v1/jobs/:id/cancel", Member, API, s.cancelJob},
		{"POST", "/sa-core/v1/jobs/:id/retry", Member, API, s.retryJob},
		{"GET", "/sa-core/v1/metrics/queue", Operator, API, s.queueMetrics},
		{"GET", openapiPath, Public, API, s.openapiDocument},

		// openai:begin (the OpenAI-compatible front door)
		{"GET", "/v1/models", Member, OpenAI, s.openaiModels},
		// A model id may hold slashes: the rest of the path is the id.
		{"GET", "/v1/models/*", Member, OpenAI, s.getModel},
		{"POST", chatCompletionsPath, Member, OpenAI, s.chatCompletions},
		{"POST", responsesPath, Member, OpenAI, s.createResponse},
		{"GET", responsesPath + "/:id", Member, OpenAI, s.getResponse},
		{"POST", responsesPath + "/:id/cancel", Member, OpenAI, s.cancelResponse},
		{"POST", filesPath, Member, OpenAI, s.uploadFile},
		{"GET", filesPath, Member, OpenAI, s.listFiles},
		{"GET", "/v1/files/:id", Member, OpenAI, s.getFile},
		{"GET", "/v1/files/:id/content", Member, OpenAI, s.fileContent},
		{"DELETE", "/v1/files/:id", Member, OpenAI, s.deleteFile},
		{"POST", "/v1/batches", Member, OpenAI, s.createBatch},
		{"GET", "/v1/batches", Member, OpenAI, s.listBatches},
		{"GET", "/v1/batches/:id", Member, OpenAI, s.getBatch},
		{"POST", "/v1/batches/:id/cancel", Member, OpenAI, s.cancelBatch},
		// openai:end
	}
}

// Routes returns the route table (paths, methods and access) for the authorization matrix test.
func (s *Server) Routes() []Route { return s.routes() }
