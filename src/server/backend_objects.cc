#include "server/backend_objects.h"

#include "server/instance_scheduler.h"

namespace inflight::server {

Model::Model() = default;
Model::~Model() = default;

}  // namespace inflight::server
